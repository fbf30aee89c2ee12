class ApplicationError(Exception):
    def __init__(self, message, *details, type=None, non_retryable=False):
        super().__init__(message)
        self.message, self.details, self.type, self.non_retryable = message, details, type, non_retryable
