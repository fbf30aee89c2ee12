"""Stand-in for temporalio.workflow: execute_activity runs the activity
method of the instance the worker registered (``worker``), in a thread, as
a worker with an activity executor would."""

import asyncio
import contextlib
import types
import uuid as _uuid

worker = None  # the registered activities instance
executed = []  # activity names, in order


def defn(cls):
    return cls


def run(fn):
    return fn


def uuid4():
    return _uuid.uuid4()


unsafe = types.SimpleNamespace(imports_passed_through=contextlib.nullcontext)


async def execute_activity(fn, arg=None, *, args=None, **options):
    executed.append(fn.__name__)
    call_args = list(args) if args is not None else [arg]
    return await asyncio.to_thread(getattr(worker, fn.__name__), *call_args)
