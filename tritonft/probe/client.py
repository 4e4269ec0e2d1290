"""A small synchronous KServe-V2 client over tritonclient (HTTP or gRPC) with per-call timeouts.

Every method takes ``timeout_s`` and raises :class:`~tritonft.probe.retry.TransientError` (worth retrying) or
:class:`~tritonft.probe.retry.PermanentError`, with a message that says what the server or the network said.
Differences between servers are absorbed here:

* HTTP inference always uses JSON tensors (``binary_data=False``): Triton accepts them, and MLServer has no
  binary-tensor extension (it answers 422 to tritonclient's binary default).
* JSON ``BYTES`` outputs come back as ``str`` over HTTP and ``bytes`` over gRPC; both become ``str``.
* ``model_config`` returns ``None`` when the server has no model-configuration endpoint (MLServer, KServe:
  HTTP 404 / gRPC UNIMPLEMENTED), so the caller can degrade and say so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy.typing as npt

from tritonft.probe.contract import TextContract
from tritonft.probe.endpoint import Endpoint
from tritonft.probe.endpoint import Protocol as Transport
from tritonft.probe.retry import PermanentError, classify, status_code
from tritonft.probe.streaming import StreamedAnswer, grpc_stream, http_generate_stream

_UNSUPPORTED = {"404", "501", "UNIMPLEMENTED"}


class V2Client(Protocol):
    """The calls the probe makes; implemented by :class:`TritonClient` (and by fakes in tests)."""

    def server_live(self, timeout_s: float) -> bool: ...
    def server_ready(self, timeout_s: float) -> bool: ...
    def server_metadata(self, timeout_s: float) -> dict[str, Any]: ...
    def model_ready(self, model: str, timeout_s: float) -> bool: ...
    def model_metadata(self, model: str, timeout_s: float) -> dict[str, Any]: ...
    def model_config(self, model: str, timeout_s: float) -> dict[str, Any] | None: ...
    def infer_text(self, model: str, contract: TextContract, texts: list[str], timeout_s: float) -> list[str]: ...
    def stream_text(self, model: str, contract: TextContract, prompt: str, timeout_s: float) -> StreamedAnswer: ...
    def infer_tensors(
        self, model: str, input_name: str, texts: list[str], outputs: Sequence[str], timeout_s: float
    ) -> dict[str, npt.NDArray[Any]]: ...
    def close(self) -> None: ...


def _as_text(value: Any) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


class TritonClient:
    """tritonclient's HTTP or gRPC ``InferenceServerClient`` behind the :class:`V2Client` calls.

    ``headers`` (e.g. an ``Authorization`` header for an authenticating ingress) go with every request and are
    never logged or reported.
    """

    def __init__(self, endpoint: Endpoint, headers: Mapping[str, str] | None = None) -> None:
        self.endpoint = endpoint
        self._headers = dict(headers or {})
        self._http: Any = None
        self._http_timeout = 0.0
        self._grpc: Any = None

    # --- transport -------------------------------------------------------------------------------------------
    def _http_client(self, timeout_s: float) -> Any:
        # geventhttpclient timeouts are fixed per client: keep one per (rounded) timeout, normally just one.
        timeout = max(0.1, round(timeout_s, 1))
        if self._http is None or self._http_timeout != timeout:
            import tritonclient.http as httpclient

            if self._http is not None:
                self._http.close()
            self._http = httpclient.InferenceServerClient(
                self.endpoint.address,
                ssl=self.endpoint.ssl,
                connection_timeout=timeout,
                network_timeout=timeout,
            )
            self._http_timeout = timeout
        return self._http

    def _grpc_client(self) -> Any:
        if self._grpc is None:
            import tritonclient.grpc as grpcclient

            self._grpc = grpcclient.InferenceServerClient(self.endpoint.address, ssl=self.endpoint.ssl)
        return self._grpc

    def _call(self, action: str, timeout_s: float, http: str, grpc: str, *args: Any, **kwargs: Any) -> Any:
        try:
            if self.endpoint.protocol is Transport.HTTP:
                return getattr(self._http_client(timeout_s), http)(*args, headers=self._headers, **kwargs)
            return getattr(self._grpc_client(), grpc)(*args, headers=self._headers, client_timeout=timeout_s, **kwargs)
        except Exception as exc:
            raise classify(exc, action, timeout_s) from exc

    # --- V2Client ---------------------------------------------------------------------------------------------
    def server_live(self, timeout_s: float) -> bool:
        return bool(self._call("server live", timeout_s, "is_server_live", "is_server_live"))

    def server_ready(self, timeout_s: float) -> bool:
        return bool(self._call("server ready", timeout_s, "is_server_ready", "is_server_ready"))

    def server_metadata(self, timeout_s: float) -> dict[str, Any]:
        kwargs = {} if self.endpoint.protocol is Transport.HTTP else {"as_json": True}
        return dict(self._call("server metadata", timeout_s, "get_server_metadata", "get_server_metadata", **kwargs))

    def model_ready(self, model: str, timeout_s: float) -> bool:
        return bool(self._call(f"model {model!r} ready", timeout_s, "is_model_ready", "is_model_ready", model))

    def model_metadata(self, model: str, timeout_s: float) -> dict[str, Any]:
        kwargs = {} if self.endpoint.protocol is Transport.HTTP else {"as_json": True}
        action = f"model {model!r} metadata"
        return dict(self._call(action, timeout_s, "get_model_metadata", "get_model_metadata", model, **kwargs))

    def model_config(self, model: str, timeout_s: float) -> dict[str, Any] | None:
        kwargs = {} if self.endpoint.protocol is Transport.HTTP else {"as_json": True}
        try:
            action = f"model {model!r} config"
            raw = self._call(action, timeout_s, "get_model_config", "get_model_config", model, **kwargs)
        except PermanentError as exc:
            cause = exc.__cause__
            if cause is not None and hasattr(cause, "status") and status_code(cause) in _UNSUPPORTED:
                return None
            raise
        config = dict(raw)
        return dict(config.get("config", config))

    def infer_text(self, model: str, contract: TextContract, texts: list[str], timeout_s: float) -> list[str]:
        import numpy as np

        batch = np.array([[t.encode("utf-8")] for t in texts], dtype=np.object_)
        action = f"model {model!r} inference"
        try:
            if self.endpoint.protocol is Transport.HTTP:
                import tritonclient.http as httpclient

                http_in = httpclient.InferInput(contract.text_input, list(batch.shape), "BYTES")
                http_in.set_data_from_numpy(batch, binary_data=False)
                http_out = httpclient.InferRequestedOutput(contract.text_output, binary_data=False)
                result = self._http_client(timeout_s).infer(
                    model,
                    [http_in],
                    outputs=[http_out],
                    headers={"Content-Type": "application/json", **self._headers},
                )
            else:
                import tritonclient.grpc as grpcclient

                grpc_in = grpcclient.InferInput(contract.text_input, list(batch.shape), "BYTES")
                grpc_in.set_data_from_numpy(batch)
                grpc_out = grpcclient.InferRequestedOutput(contract.text_output)
                result = self._grpc_client().infer(
                    model, [grpc_in], outputs=[grpc_out], headers=self._headers, client_timeout=timeout_s
                )
        except Exception as exc:
            raise classify(exc, action, timeout_s) from exc
        array = result.as_numpy(contract.text_output)
        if array is None:
            raise PermanentError(f"{action}: the response has no output {contract.text_output!r}")
        answers = [_as_text(v) for v in array.reshape(-1).tolist()]
        if len(answers) != len(texts):
            raise PermanentError(f"{action}: sent {len(texts)} prompt(s), got {len(answers)} answer(s)")
        return answers

    def infer_tensors(
        self, model: str, input_name: str, texts: list[str], outputs: Sequence[str], timeout_s: float
    ) -> dict[str, npt.NDArray[Any]]:
        """``texts`` (one row each) into the ``BYTES`` input ``input_name``; the named ``outputs`` as arrays with one
        row per text (an encoder's ``embedding``, or its ``label`` and ``scores``)."""
        import numpy as np

        batch = np.array([[t.encode("utf-8")] for t in texts], dtype=np.object_)
        action = f"model {model!r} inference"
        try:
            if self.endpoint.protocol is Transport.HTTP:
                import tritonclient.http as httpclient

                http_in = httpclient.InferInput(input_name, list(batch.shape), "BYTES")
                http_in.set_data_from_numpy(batch, binary_data=False)
                result = self._http_client(timeout_s).infer(
                    model,
                    [http_in],
                    outputs=[httpclient.InferRequestedOutput(name, binary_data=False) for name in outputs],
                    headers={"Content-Type": "application/json", **self._headers},
                )
            else:
                import tritonclient.grpc as grpcclient

                grpc_in = grpcclient.InferInput(input_name, list(batch.shape), "BYTES")
                grpc_in.set_data_from_numpy(batch)
                result = self._grpc_client().infer(
                    model,
                    [grpc_in],
                    outputs=[grpcclient.InferRequestedOutput(name) for name in outputs],
                    headers=self._headers,
                    client_timeout=timeout_s,
                )
        except Exception as exc:
            raise classify(exc, action, timeout_s) from exc
        arrays: dict[str, npt.NDArray[Any]] = {}
        for name in outputs:
            array = result.as_numpy(name)
            if array is None:
                raise PermanentError(f"{action}: the response has no output {name!r}")
            if array.shape[:1] != (len(texts),):
                raise PermanentError(f"{action}: sent {len(texts)} text(s), got {name!r} of shape {list(array.shape)}")
            arrays[name] = array
        return arrays

    def stream_text(self, model: str, contract: TextContract, prompt: str, timeout_s: float) -> StreamedAnswer:
        """A decoupled model's streamed answer to ``prompt`` (see :mod:`tritonft.probe.streaming`): over gRPC a
        ``ModelStreamInfer`` stream, over HTTP Triton's ``generate_stream`` endpoint."""
        if self.endpoint.protocol is Transport.HTTP:
            return http_generate_stream(
                self.endpoint, model, contract, prompt, headers=self._headers, timeout_s=timeout_s
            )
        return grpc_stream(self.endpoint, model, contract, prompt, headers=self._headers, timeout_s=timeout_s)

    def close(self) -> None:
        for client in (self._http, self._grpc):
            if client is not None:
                client.close()
        self._http = self._grpc = None
