from typing import Generic, TypeVar

T = TypeVar("T")


class RunContextWrapper(Generic[T]):
    pass
