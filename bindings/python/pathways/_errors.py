"""Statuses as exceptions: one class per status code, message preserved."""

from ._lowlevel import ffi, lib


class PathwaysError(Exception):
    """A non-OK pw_status_t. |code| is the numeric status code, |code_name|
    its name ("INVALID_ARGUMENT"), |message| the library's message with its
    context chain, exactly as the C library wrote it."""

    code = lib.PW_STATUS_UNKNOWN
    code_name = "UNKNOWN"

    def __init__(self, message=""):
        super().__init__(message)
        self.message = message

    def __str__(self):
        return self.message

    def __repr__(self):
        return f"{type(self).__name__}({self.message!r})"

    def __reduce__(self):
        return (type(self), (self.message,))


class CancelledError(PathwaysError):
    code, code_name = lib.PW_STATUS_CANCELLED, "CANCELLED"


class UnknownError(PathwaysError):
    code, code_name = lib.PW_STATUS_UNKNOWN, "UNKNOWN"


class InvalidArgumentError(PathwaysError, ValueError):
    code, code_name = lib.PW_STATUS_INVALID_ARGUMENT, "INVALID_ARGUMENT"


class DeadlineExceededError(PathwaysError, TimeoutError):
    code, code_name = lib.PW_STATUS_DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED"

    def __str__(self):  # OSError would format (errno, strerror)
        return self.message


class NotFoundError(PathwaysError, LookupError):
    code, code_name = lib.PW_STATUS_NOT_FOUND, "NOT_FOUND"


class AlreadyExistsError(PathwaysError):
    code, code_name = lib.PW_STATUS_ALREADY_EXISTS, "ALREADY_EXISTS"


class PermissionDeniedError(PathwaysError):
    code, code_name = lib.PW_STATUS_PERMISSION_DENIED, "PERMISSION_DENIED"


class ResourceExhaustedError(PathwaysError):
    code, code_name = lib.PW_STATUS_RESOURCE_EXHAUSTED, "RESOURCE_EXHAUSTED"


class FailedPreconditionError(PathwaysError):
    code, code_name = lib.PW_STATUS_FAILED_PRECONDITION, "FAILED_PRECONDITION"


class AbortedError(PathwaysError):
    code, code_name = lib.PW_STATUS_ABORTED, "ABORTED"


class OutOfRangeError(PathwaysError):
    code, code_name = lib.PW_STATUS_OUT_OF_RANGE, "OUT_OF_RANGE"


class UnimplementedError(PathwaysError, NotImplementedError):
    code, code_name = lib.PW_STATUS_UNIMPLEMENTED, "UNIMPLEMENTED"


class InternalError(PathwaysError):
    code, code_name = lib.PW_STATUS_INTERNAL, "INTERNAL"


class UnavailableError(PathwaysError):
    code, code_name = lib.PW_STATUS_UNAVAILABLE, "UNAVAILABLE"


class DataLossError(PathwaysError):
    code, code_name = lib.PW_STATUS_DATA_LOSS, "DATA_LOSS"


class UnauthenticatedError(PathwaysError):
    code, code_name = lib.PW_STATUS_UNAUTHENTICATED, "UNAUTHENTICATED"


ERROR_CLASSES = (
    CancelledError, UnknownError, InvalidArgumentError, DeadlineExceededError,
    NotFoundError, AlreadyExistsError, PermissionDeniedError,
    ResourceExhaustedError, FailedPreconditionError, AbortedError,
    OutOfRangeError, UnimplementedError, InternalError, UnavailableError,
    DataLossError, UnauthenticatedError,
)

_BY_CODE = {cls.code: cls for cls in ERROR_CLASSES}
assert len(_BY_CODE) == lib.PW_STATUS_CODE_COUNT - 1
for _cls in ERROR_CLASSES:
    # The class names mirror the C names; check they agree with the library.
    assert ffi.string(lib.pw_status_code_string(_cls.code)).decode() == _cls.code_name


def error_class(code):
    """The exception class of a numeric status code (UnknownError for an
    unknown one)."""
    return _BY_CODE.get(code, UnknownError)


def take_error(status):
    """Converts a non-NULL pw_status_t into an exception and frees it."""
    try:
        code = lib.pw_status_code(status)
        message = ffi.string(lib.pw_status_message(status)).decode("utf-8", "replace")
    finally:
        lib.pw_status_free(status)
    return _BY_CODE.get(code, UnknownError)(message)


def raise_status(status):
    """Raises (and frees) a non-NULL pw_status_t."""
    raise take_error(status)


def check(status):
    """Raises if |status| is not OK (NULL)."""
    if status:
        raise take_error(status)


def status_from_exception(exc, context=None):
    """A new pw_status_t for a Python exception (for callbacks into C): a
    PathwaysError keeps its code, anything else is UNKNOWN with the type name
    in the message."""
    if isinstance(exc, PathwaysError):
        code, text = exc.code, exc.message
    else:
        code, text = lib.PW_STATUS_UNKNOWN, f"{type(exc).__name__}: {exc}"
        if isinstance(exc, (ValueError, TypeError)):
            code = lib.PW_STATUS_INVALID_ARGUMENT
    if context:
        text = f"{context}: {text}"
    return lib.pwpy_status_make(code, text.encode("utf-8", "replace"))
