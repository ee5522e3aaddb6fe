"""The error body of every non-2xx answer (hoglake-api.md section 2).

Handlers raise :class:`ApiError`; the HTTP layer turns it into
``{"error": code, "detail": text, ...extra}`` with the given status.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A refusal with an HTTP status, a machine ``error`` code and extra body keys."""

    def __init__(self, status: int, code: str, detail: str | None = None, **extra: Any) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail
        self.extra = extra
        self.headers: dict[str, str] = {}

    def body(self) -> dict[str, Any]:
        """The JSON body: ``error`` always, ``detail`` when known, then the extras."""
        out: dict[str, Any] = {"error": self.code}
        if self.detail is not None:
            out["detail"] = self.detail
        out.update({k: v for k, v in self.extra.items() if v is not None})
        return out


def bad_request(detail: str) -> ApiError:
    """400 ``bad_request``: malformed JSON, unknown field, wrong type, bad query/path param."""
    return ApiError(400, "bad_request", detail)


def not_found(detail: str) -> ApiError:
    """404 ``not_found``: catalog / namespace / table / receipt / snapshot absent."""
    return ApiError(404, "not_found", detail)


def already_exists(detail: str) -> ApiError:
    """409 ``already_exists``: create of an existing object."""
    return ApiError(409, "already_exists", detail)


def validation(detail: str) -> ApiError:
    """422 ``validation``: a semantic refusal."""
    return ApiError(422, "validation", detail)


def expired(detail: str) -> ApiError:
    """410 ``expired``: below the catalog's retention floor."""
    return ApiError(410, "expired", detail)


def commit_conflict(detail: str) -> ApiError:
    """409 ``commit_conflict``: retryable conflict (e.g. a path queued for deletion)."""
    return ApiError(409, "commit_conflict", detail)


def queue_timeout(detail: str, retry_after: str = "1") -> ApiError:
    """503 ``commit_queue_timeout`` with ``Retry-After`` (section 1 and 2)."""
    err = ApiError(503, "commit_queue_timeout", detail)
    err.headers["Retry-After"] = retry_after
    return err
