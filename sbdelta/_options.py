"""What azure-servicebus clients take besides a namespace: connection strings and keyword options.

A connection string names a namespace *location*: ``Endpoint=<folder path or Hadoop URI>`` (a
local path, ``file:/``, ``abfss://``, ``s3a://``, ``gs://``, ``dbfs:/``), with the SDK's other
parts accepted: ``SharedAccessKeyName``, ``SharedAccessKey`` and ``SharedAccessSignature`` are
taken and have no effect (access control is the storage's: file permissions, cloud IAM, Unity
Catalog grants), ``EntityPath`` limits the client to that entity as in the SDK.

Keyword options: the ``retry_*`` options govern sbdelta's retries of commits that lost to
concurrent writers (:class:`~sbdelta._store.RetryPolicy`); the transport options of the SDK
(:data:`NO_EFFECT`) are accepted and have no effect, since no network connection is made. An
unknown keyword raises TypeError naming what is accepted.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Dict, Optional

from ._store import DEFAULT_RETRY, RetryPolicy
from .exceptions import ConfigurationError

__all__ = ["ServiceBusConnectionStringProperties", "parse_connection_string",
           "retry_policy_from", "NO_EFFECT", "RETRY_OPTIONS", "TransportType"]


class TransportType(Enum):
    """The SDK's transport protocols (``transport_type=``). Accepted, with no effect: sbdelta
    makes no network connection, it reads and writes Delta tables."""

    Amqp = 1
    AmqpOverWebsocket = 2

#: azure-servicebus keyword options that sbdelta accepts and ignores: they configure an AMQP or
#: HTTP connection, and sbdelta reads and writes Delta tables instead.
NO_EFFECT = frozenset({
    "logging_enable", "transport_type", "http_proxy", "user_agent", "custom_endpoint_address",
    "connection_verify", "ssl_context", "uamqp_transport", "socket_timeout", "api_version",
    "client_identifier", "connection_timeout", "keep_alive",
})
RETRY_OPTIONS = ("retry_total", "retry_backoff_factor", "retry_backoff_max", "retry_mode")

_SAS_PARTS = ("sharedaccesskeyname", "sharedaccesskey", "sharedaccesssignature",
              "usedevelopmentemulator")


@dataclass(frozen=True)
class ServiceBusConnectionStringProperties:
    """A parsed connection string (as the SDK's ``ServiceBusConnectionStringProperties``).

    ``fully_qualified_namespace`` and ``endpoint`` are both the namespace location (a folder
    path or Hadoop URI: what a client takes as its namespace); ``entity_path`` the entity a
    client is limited to; the shared-access parts as given (they have no effect).
    """

    fully_qualified_namespace: str
    endpoint: str
    entity_path: Optional[str] = None
    shared_access_signature: Optional[str] = None
    shared_access_key_name: Optional[str] = None
    shared_access_key: Optional[str] = None

    @property
    def namespace(self) -> str:
        """The namespace location (``fully_qualified_namespace``)."""
        return self.fully_qualified_namespace


def parse_connection_string(conn_str: Any) -> ServiceBusConnectionStringProperties:
    """Parse ``Endpoint=...;[SharedAccessKeyName=...;SharedAccessKey=...;][EntityPath=...]``
    (keys in any case, in any order), as the SDK's ``parse_connection_string``.

    Raises:
        ConfigurationError: Blank or malformed, no ``Endpoint``, an unknown part, or an
            ``sb://`` endpoint (an Azure namespace, which sbdelta does not reach).
    """
    if not isinstance(conn_str, str) or not conn_str.strip():
        raise ConfigurationError(
            "the connection string is blank: give Endpoint=<namespace folder or URI>, for "
            "example Endpoint=file:///data/sbdelta;EntityPath=orders")
    parts: Dict[str, str] = {}
    for piece in conn_str.strip().strip(";").split(";"):
        if not piece.strip():
            continue
        key, sep, value = piece.partition("=")
        key = key.strip().lower()
        if not sep or not key:
            raise ConfigurationError(
                f"malformed connection string part {piece.strip()!r}: parts are Key=Value, "
                "separated by ';'")
        if key in parts:
            raise ConfigurationError(f"the connection string gives {key!r} twice")
        parts[key] = value.strip()
    unknown = sorted(set(parts) - {"endpoint", "entitypath", *_SAS_PARTS})
    if unknown:
        raise ConfigurationError(
            f"unknown connection string part(s) {unknown}: sbdelta takes Endpoint, EntityPath, "
            "and (with no effect) SharedAccessKeyName, SharedAccessKey, SharedAccessSignature, "
            "UseDevelopmentEmulator")
    endpoint = parts.get("endpoint", "")
    if not endpoint:
        raise ConfigurationError(
            "the connection string has no Endpoint: give Endpoint=<namespace folder or URI>")
    if endpoint.lower().startswith(("sb://", "amqp://", "amqps://")):
        raise ConfigurationError(
            f"Endpoint={endpoint} addresses an Azure Service Bus namespace; sbdelta's namespaces "
            "are storage locations: give Endpoint=<folder path or Hadoop URI> (file:/, abfss://, "
            "s3a://, gs://, dbfs:/)")
    location = os.path.expanduser(endpoint)
    return ServiceBusConnectionStringProperties(
        fully_qualified_namespace=location, endpoint=location,
        entity_path=parts.get("entitypath") or None,
        shared_access_signature=parts.get("sharedaccesssignature") or None,
        shared_access_key_name=parts.get("sharedaccesskeyname") or None,
        shared_access_key=parts.get("sharedaccesskey") or None)


def _number(value: Any, name: str, *, minimum: float, integer: bool = False,
            exclusive: bool = False) -> float:
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) \
            or (value <= minimum if exclusive else value < minimum):
        what = "an integer" if integer else "a number"
        bound = f"> {minimum}" if exclusive else f">= {minimum}"
        raise ConfigurationError(f"{name} must be {what} {bound}, got {value!r}")
    return value


def retry_policy_from(options: Dict[str, Any], who: str) -> RetryPolicy:
    """The retry policy of ``options`` (a client's keyword arguments), after checking that
    every keyword is one the SDK's client takes.

    Only the options given change sbdelta's defaults, which suit commit conflicts (many quick,
    jittered retries): ``retry_total`` retries after the first try, ``retry_backoff_factor``
    seconds scale the first wait, ``retry_backoff_max`` caps each wait, ``retry_mode`` is
    ``"exponential"`` (doubling waits) or ``"fixed"``.

    Raises:
        TypeError: A keyword the SDK's ``who`` does not take either.
        ConfigurationError: A retry option of the wrong type or range.
    """
    unknown = sorted(set(options) - NO_EFFECT - set(RETRY_OPTIONS))
    if unknown:
        raise TypeError(
            f"{who} got unexpected keyword argument(s) {unknown}; besides spark and clock it "
            f"takes the retry options {list(RETRY_OPTIONS)} and (with no effect: no network "
            f"connection is made) {sorted(NO_EFFECT)}")
    policy = DEFAULT_RETRY
    if options.get("retry_total") is not None:
        total = _number(options["retry_total"], "retry_total", minimum=0, integer=True)
        policy = replace(policy, attempts=int(total) + 1)
    if options.get("retry_backoff_factor") is not None:
        policy = replace(policy, backoff=float(_number(
            options["retry_backoff_factor"], "retry_backoff_factor", minimum=0)))
    if options.get("retry_backoff_max") is not None:
        top = float(_number(options["retry_backoff_max"], "retry_backoff_max", minimum=0,
                            exclusive=True))
        policy = replace(policy, backoff_max=top, max_seconds=max(policy.max_seconds, top))
    mode = options.get("retry_mode")
    if mode is not None:
        text = str(getattr(mode, "value", mode)).lower()
        if text not in ("exponential", "fixed"):
            raise ConfigurationError(
                f"retry_mode must be 'exponential' or 'fixed' (or azure's RetryMode), got "
                f"{mode!r}")
        policy = replace(policy, fixed=text == "fixed")
    return policy
