import inspect
import pickle

import pytest

from raytroupe import protocols
from raytroupe.protocols import errors
from raytroupe.protocols.errors import (
    AgentNotFound,
    AuthFailed,
    BadRequest,
    BadResponse,
    BudgetExceeded,
    Busy,
    ConfigError,
    Conflict,
    ContentFiltered,
    ContextTooLong,
    DeadlineExceeded,
    DeliveryError,
    ErrorCode,
    ExperimentNotFound,
    Forbidden,
    GuardrailNotFound,
    GuardrailTripped,
    HopLimitExceeded,
    InvalidAddress,
    InvalidArguments,
    InvalidInput,
    InvalidRequest,
    JobCancelled,
    JobError,
    JobFailed,
    JobNotFound,
    JobTimeout,
    KnowledgeNotFound,
    LessonNotFound,
    MalformedEnvelope,
    ModelError,
    ModelTimeout,
    Overloaded,
    PlanError,
    ProviderUnavailable,
    QualityGateFailed,
    QuotaExceeded,
    RateLimited,
    RecipientUnavailable,
    SandboxUnavailable,
    ScheduleNotFound,
    ScriptError,
    SessionNotFound,
    SkillNotFound,
    SpendLimitNotFound,
    StateUnavailable,
    StreamInterrupted,
    TeamNotFound,
    ToolError,
    ToolInfrastructureError,
    ToolNotAllowed,
    TroupeError,
    Unauthorized,
    UnknownRecipient,
    UnpricedModel,
    Unreachable,
    UnsupportedSchemaVersion,
    WebhookNotFound,
    WorkLimitExceeded,
    error_class,
)
from raytroupe.protocols.payloads import ErrorPayload

PARENTS = {
    TroupeError: Exception,
    InvalidInput: TroupeError,
    MalformedEnvelope: InvalidInput,
    UnsupportedSchemaVersion: InvalidInput,
    ConfigError: InvalidInput,
    InvalidAddress: InvalidInput,
    TeamNotFound: ConfigError,
    SkillNotFound: ConfigError,
    AgentNotFound: ConfigError,
    SessionNotFound: ConfigError,
    WebhookNotFound: ConfigError,
    ScheduleNotFound: ConfigError,
    GuardrailNotFound: ConfigError,
    SpendLimitNotFound: ConfigError,
    GuardrailTripped: TroupeError,
    KnowledgeNotFound: ConfigError,
    LessonNotFound: ConfigError,
    ExperimentNotFound: ConfigError,
    Conflict: InvalidInput,
    DeliveryError: TroupeError,
    UnknownRecipient: DeliveryError,
    RecipientUnavailable: DeliveryError,
    DeadlineExceeded: DeliveryError,
    HopLimitExceeded: DeliveryError,
    ModelError: TroupeError,
    ScriptError: ModelError,
    RateLimited: ModelError,
    ModelTimeout: ModelError,
    Overloaded: ModelError,
    ProviderUnavailable: ModelError,
    StreamInterrupted: ModelError,
    ContextTooLong: ModelError,
    AuthFailed: ModelError,
    BadRequest: ModelError,
    ContentFiltered: ModelError,
    BudgetExceeded: TroupeError,
    UnpricedModel: BudgetExceeded,
    Forbidden: TroupeError,
    QuotaExceeded: Forbidden,
    ToolError: TroupeError,
    ToolNotAllowed: ToolError,
    InvalidArguments: ToolError,
    SandboxUnavailable: ToolError,
    ToolInfrastructureError: ToolError,
    StateUnavailable: TroupeError,
    PlanError: TroupeError,
    QualityGateFailed: TroupeError,
    JobError: TroupeError,
    JobFailed: JobError,
    JobCancelled: JobFailed,
    JobTimeout: JobError,
    JobNotFound: JobError,
    InvalidRequest: InvalidInput,
    Unauthorized: TroupeError,
    Unreachable: TroupeError,
    BadResponse: TroupeError,
    WorkLimitExceeded: InvalidInput,
    Busy: TroupeError,
}
CLASSES = list(PARENTS)
RETRYABLE = {
    Busy,
    StateUnavailable,
    Unreachable,
    RecipientUnavailable,
    DeadlineExceeded,
    JobTimeout,
    RateLimited,
    ModelTimeout,
    Overloaded,
    ProviderUnavailable,
    StreamInterrupted,
}
DETAIL = {
    "tool": "search",
    "attempts": 2,
    "ratio": 0.5,
    "ok": False,
    "none": None,
    "items": [1, "two"],
    "nested": {"a": [1, {"b": None}]},
}


def pickled(obj, protocol=pickle.DEFAULT_PROTOCOL):
    return pickle.loads(pickle.dumps(obj, protocol=protocol))  # noqa: S301 - our own bytes


def ids(cls):
    return cls.__name__


def test_every_exported_error_class_is_listed():
    exported = {
        obj
        for name in errors.__all__
        if inspect.isclass(obj := getattr(errors, name)) and issubclass(obj, TroupeError)
    }
    assert exported == set(CLASSES)
    for cls in CLASSES:
        assert getattr(protocols, cls.__name__) is cls


@pytest.mark.parametrize(("cls", "parent"), PARENTS.items(), ids=[c.__name__ for c in PARENTS])
def test_hierarchy(cls, parent):
    assert cls.__bases__ == (parent,)
    assert issubclass(cls, TroupeError)


@pytest.mark.parametrize("cls", CLASSES, ids=ids)
def test_retryable_flags(cls):
    assert cls.retryable is (cls in RETRYABLE)
    assert cls("m").retryable is (cls in RETRYABLE)


def test_codes_are_unique_per_class():
    codes = [cls.code for cls in CLASSES]
    assert len(set(codes)) == len(codes)
    assert all(isinstance(c, ErrorCode) for c in codes)


@pytest.mark.parametrize("cls", CLASSES, ids=ids)
def test_message_and_detail(cls):
    err = cls("something broke", **DETAIL)
    assert str(err) == "something broke"
    assert err.message == "something broke"
    assert err.args == ("something broke",)
    assert err.detail == DETAIL
    assert cls("plain").detail == {}


@pytest.mark.parametrize("cls", CLASSES, ids=ids)
@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_round_trip_keeps_class_and_detail(cls, protocol):
    err = cls("boom", **DETAIL)
    clone = pickled(err, protocol)
    assert type(clone) is cls
    assert clone is not err
    assert clone.message == "boom"
    assert str(clone) == "boom"
    assert clone.detail == DETAIL
    assert clone.code is cls.code
    assert clone.retryable is cls.retryable


def test_pickle_round_trip_keeps_non_plain_detail():
    err = JobFailed("no answer", result=ErrorPayload(code=ErrorCode.JOB, message="x"), ids=(1, 2))
    clone = pickled(err)
    assert type(clone) is JobFailed
    assert clone.detail == {"result": ErrorPayload(code=ErrorCode.JOB, message="x"), "ids": (1, 2)}


def test_pickled_errors_can_be_caught_by_their_base():
    clone = pickled(RecipientUnavailable("gone", actor="agent/w1"))
    with pytest.raises(DeliveryError) as info:
        raise clone
    assert info.value.detail == {"actor": "agent/w1"}


@pytest.mark.parametrize("cls", CLASSES, ids=ids)
def test_error_class_by_code(cls):
    assert error_class(cls.code) is cls


@pytest.mark.parametrize("code", list(ErrorCode), ids=str)
def test_error_class_covers_every_code(code):
    cls = error_class(code)
    assert issubclass(cls, TroupeError)
    if cls is not TroupeError:
        assert cls.code is code


def test_codes_without_a_class_map_to_the_base():
    assert error_class(ErrorCode.MAX_TURNS) is TroupeError
    assert error_class(ErrorCode.INTERNAL) is TroupeError


@pytest.mark.parametrize("cls", CLASSES, ids=ids)
def test_error_payload_round_trip(cls):
    err = cls("it failed", **DETAIL)
    payload = ErrorPayload.from_exception(err)
    assert payload.kind == "error"
    assert payload.code is cls.code
    assert payload.message == "it failed"
    assert payload.retryable is cls.retryable
    assert payload.detail == DETAIL
    again = payload.to_exception()
    assert type(again) is cls
    assert again.message == "it failed"
    assert again.detail == DETAIL
    assert ErrorPayload.model_validate(payload.model_dump(mode="json")) == payload
    assert ErrorPayload.model_validate(payload.model_dump(mode="json")).to_exception().detail == (
        DETAIL
    )


def test_error_payload_drops_non_plain_detail():
    err = JobFailed(
        "no answer", result=object(), nested=[1, {"x": object()}], ids=(1, 2), count=3, note="kept"
    )
    payload = ErrorPayload.from_exception(err)
    assert payload.detail == {"ids": (1, 2), "count": 3, "note": "kept"}
    # what is kept always encodes
    encode_check = ErrorPayload.model_validate(payload.model_dump(mode="json"))
    assert encode_check.detail == {"ids": [1, 2], "count": 3, "note": "kept"}


@pytest.mark.parametrize(
    "exc",
    [ValueError("bad value"), KeyError("k"), RuntimeError(), ZeroDivisionError("division")],
    ids=lambda e: type(e).__name__,
)
def test_error_payload_from_foreign_exception_is_internal(exc):
    payload = ErrorPayload.from_exception(exc)
    assert payload.code is ErrorCode.INTERNAL
    assert payload.message == f"{type(exc).__name__}: {exc}"
    assert payload.retryable is False
    assert payload.detail == {}
    again = payload.to_exception()
    assert type(again) is TroupeError
    assert again.message == payload.message


@pytest.mark.parametrize("code", list(ErrorCode), ids=str)
def test_error_payload_to_exception_by_code(code):
    exc = ErrorPayload(code=code, message="m", detail={"k": 1}).to_exception()
    assert type(exc) is error_class(code)
    assert exc.detail == {"k": 1}
    assert exc.message == "m"


def test_error_payload_rejects_unknown_codes():
    with pytest.raises(ValueError, match="code"):
        ErrorPayload(code="no_such_code", message="m")


def test_error_payload_to_exception_tolerates_a_message_detail_key():
    payload = ErrorPayload(code=ErrorCode.TOOL, message="m", detail={"message": "inner"})
    exc = payload.to_exception()
    assert type(exc) is ToolError
    assert exc.message == "m"
