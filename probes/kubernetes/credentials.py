"""The kubeconfig's credential load, bounded: a hung exec/OIDC credential plugin is the
cluster's failure, never the sweep's.

Policy:

- :func:`load_credentials` loads the kubeconfig (``KUBECONFIG``-style merged lists included)
  into a private ``Configuration`` with kubernetes_asyncio's own loader, within a time bound,
  and says the context's namespace (kubectl's default when the config names none). A list
  merges as kubectl merges it (the first file to set a context, cluster, user or
  ``current-context`` wins; the library let the last ``current-context`` win), and a file in
  it that is no kubeconfig is :class:`KubeconfigFileError` naming that file, not the list.
  What the load was waiting on when the bound ran out (the exec plugin's command, the OIDC
  token refresh, the GCP token) is named in the :class:`CredentialTimeout` it raises.
- An exec credential plugin (``users[].user.exec``) is run here, not by the library: in its
  own session (process group), never interactive (stdin is ``/dev/null``: a sweep cannot
  answer a prompt), and when the load is cancelled (its timeout, the sweep's, Ctrl-C) the
  whole group is killed with SIGKILL and reaped: a hung plugin, or a child it left holding
  its stdout, does not outlive the sweep. The library's runner leaves it running
  (tomplus/kubernetes_asyncio ``ExecProvider.run`` is cancelled mid-read, its process kept).
- A plugin that exits non-zero is a :class:`ConfigException` naming its command, exit code
  and the end of its stderr; an answer that is no ExecCredential (bad JSON, missing keys, no
  token nor client certificate) likewise. Its output is bounded: stdout past
  :data:`MAX_OUTPUT_BYTES` stops the plugin (killed with its group), and only the end of its
  stderr is kept, so a plugin printing without end costs neither memory nor more time.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from contextlib import suppress
from typing import Any

import yaml  # type: ignore[import-untyped]  # no stubs installed; only YAMLError is used
from kubernetes_asyncio.client import Configuration
from kubernetes_asyncio.config.config_exception import ConfigException
from kubernetes_asyncio.config.exec_provider import ExecProvider
from kubernetes_asyncio.config.kube_config import (
    ENV_KUBECONFIG_PATH_SEPARATOR,
    KUBE_CONFIG_DEFAULT_LOCATION,
    FileOrData,
    KubeConfigLoader,
    KubeConfigMerger,
)

from probes.config import NAMESPACE_NAME
from probes.local_files import check_regular, refusal

STDERR_CHARS = 300
"""The end of a failed plugin's stderr quoted in the error (its message is usually last)."""
MAX_OUTPUT_BYTES = 1 << 20
"""What a plugin's stdout may hold (an ExecCredential is a few KB; a certificate chain tens)."""
STDERR_KEPT_BYTES = 64 << 10
"""The end of a plugin's stderr kept, for the message quoted when it fails."""
REAP_S = 2.0
"""How long a killed plugin's exit is waited for (SIGKILL: it is prompt)."""


class KubeconfigFileError(ConfigException):
    """One file of the kubeconfig (a ``KUBECONFIG``-style list's) is no kubeconfig; ``path``
    names it (the message never quotes its content: a slip may name a secret file)."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(why)
        self.path = path


class CredentialTimeout(Exception):
    """The credential load did not finish in time; ``waiting_on`` says on what."""

    def __init__(self, waiting_on: str, *, killed: bool = False) -> None:
        super().__init__(waiting_on)
        self.waiting_on = waiting_on
        self.killed = killed
        """An exec plugin was running: it was killed, with its process group."""


async def load_credentials(kubeconfig: str | None, context: str | None,
                           configuration: Configuration, timeout_s: float) -> str | None:
    """Load ``kubeconfig`` (``None``: the default, ``$KUBECONFIG`` or ``~/.kube/config``) at
    ``context`` into ``configuration`` within ``timeout_s`` (:class:`CredentialTimeout`);
    returns that context's namespace (``None`` when it names none)."""
    paths = kubeconfig or KUBE_CONFIG_DEFAULT_LOCATION
    _check_some_exist(paths)
    merged = _Merger(paths)
    loader = _BoundedLoader(config_dict=merged.config, config_base_path=None,
                            active_context=context)
    try:
        async with asyncio.timeout(timeout_s):
            await loader.load_and_set(configuration)
    except TimeoutError as exc:
        raise CredentialTimeout(loader.waiting_on, killed=loader.killed) from exc
    return _namespace_of(loader)


def _check_some_exist(paths: str) -> None:
    """Raise unless a file of ``paths`` exists: the library would warn on stderr and then
    fail on the empty merge ('Expected key current-context'), which says nothing of why."""
    files = [os.path.expanduser(path) for path in paths.split(ENV_KUBECONFIG_PATH_SEPARATOR)
             if path]
    if not any(os.path.exists(path) for path in files):
        # named as given (~/.kube/config, a $KUBECONFIG list): with no kubeconfig in the
        # config, the detail would otherwise say only 'the default kubeconfig'
        raise KubeconfigFileError(paths, "no such file" if len(files) == 1
                                  else "none of its files exists")


def _namespace_of(loader: KubeConfigLoader) -> str | None:
    """The loaded context's namespace, checked as the API server would name one."""
    current = loader.current_context or {}
    body = current.get("context") if isinstance(current, dict) else None
    namespace = body.get("namespace") if isinstance(body, dict) else None
    if namespace in (None, ""):
        return None
    if not isinstance(namespace, str) or not NAMESPACE_NAME.fullmatch(namespace):
        raise ConfigException(f"context {current.get('name')!r}: its namespace is no "
                              "namespace name")
    return namespace


class _Merger(KubeConfigMerger):
    """The library's merge of ``paths`` (``KUBECONFIG``-style), file by file, each checked
    first, with kubectl's rule for ``current-context`` (the first file setting it wins).

    The library reads each file whole and synchronously: a FIFO or a device named by mistake
    would block the event loop, every cluster's sweep with it. It also assumes each file's
    shape (a mapping of lists of mappings): another file's YAML raised TypeError from deep
    inside. Either is a :class:`KubeconfigFileError` naming the file, never its content."""

    def load_config(self, path: str) -> None:
        before = self.config_merged.value.get("current-context") if self.config_merged else None
        _check_file(path)
        if os.stat(path).st_size == 0:
            return  # kubectl: a file with no data is the empty config (client-go ``Load``)
        try:
            super().load_config(path)
        except (TypeError, AttributeError, KeyError) as exc:
            raise KubeconfigFileError(path, "not a kubeconfig (its YAML is no mapping of "
                                      "clusters, contexts and users lists)") from exc
        except yaml.YAMLError as exc:  # one line: a YAML error's marks come on lines of their own
            raise KubeconfigFileError(path, " ".join(str(exc).split())) from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise KubeconfigFileError(path, f"{type(exc).__name__}: {exc}") from exc
        if before and self.config_merged is not None:
            self.config_merged.value["current-context"] = before


def _check_file(path: str) -> None:
    """Raise unless ``path`` is a regular file of a kubeconfig's size
    (``probes.local_files``); the library skips an absent one before calling here."""
    try:
        check_regular(path)
    except (ValueError, OSError) as exc:
        raise KubeconfigFileError(path, refusal(exc)) from exc


class _BoundedLoader(KubeConfigLoader):
    """The library's loader with the exec plugin run by :func:`run_exec_plugin`, and the
    step it is waiting on recorded for the timeout's message. The files its kubeconfig
    names (``certificate-authority``, ``client-certificate``, ``client-key``, ``tokenFile``)
    are checked first, as the kubeconfig itself is (:func:`_check_file`): the library reads
    a token file whole, and the TLS context its certificates, synchronously in the event
    loop, where a FIFO or a device blocked every cluster's sweep."""

    waiting_on = "the kubeconfig's credential load"
    killed = False

    def _load_user_token(self) -> bool:
        if self._user is not None:
            self._check_named(self._user, self._user.path, ("tokenFile", "token"))
        return bool(super()._load_user_token())

    def _load_cluster_info(self) -> None:
        cluster = self._cluster
        server = cluster.safe_get("server") if cluster is not None else None
        if cluster is not None and isinstance(server, str) and server.startswith("https"):
            # The files the library hands to the TLS context (one base path, as it does).
            self._check_named(cluster, cluster.path, ("certificate-authority",
                                                      "certificate-authority-data"))
            if self._user is not None and "cert_file" not in self.__dict__:
                for key in ("client-certificate", "client-key"):
                    self._check_named(self._user, cluster.path, (key, f"{key}-data"))
        super()._load_cluster_info()

    def _check_named(self, section: Any, config_path: str | None,
                     keys: tuple[str, str]) -> None:
        """Check the file ``section`` names under ``keys[0]`` (unless its data, ``keys[1]``,
        is given inline), resolved as ``FileOrData`` resolves it."""
        name, data = keys
        if data in section or name not in section:
            return
        value = section[name]
        if not isinstance(value, str):
            raise ConfigException(f"{name}: no file name")
        path = os.path.normpath(os.path.join(self._get_base_path(config_path), value))
        try:
            check_regular(path)
        except (ValueError, OSError) as exc:
            raise ConfigException(f"{name} {path}: {refusal(exc)}") from exc

    async def load_gcp_token(self) -> str:
        self.waiting_on = "the GCP auth-provider token"
        token: str = await super().load_gcp_token()
        return token

    async def _load_oid_token(self) -> str:
        self.waiting_on = "the OIDC auth-provider token refresh"
        token: str = await super()._load_oid_token()
        return token

    async def load_from_exec_plugin(self) -> bool:
        """As the library's, with the plugin run (and killed) by :func:`run_exec_plugin`.
        Its ExecCredential gives a bearer token, or a client certificate and key."""
        assert self._user is not None and self._cluster is not None
        provider = ExecProvider(self._user["exec"])  # checks command/apiVersion, args, env
        self.waiting_on = f"the exec credential plugin {provider.args[0]!r}"
        try:
            status = await run_exec_plugin(provider)
        except asyncio.CancelledError:
            self.killed = True  # run_exec_plugin killed it before the cancel went on
            raise
        if status.get("token"):
            self.token = f"Bearer {status['token']}"
            return True
        if status.get("clientCertificateData") and status.get("clientKeyData"):
            base = self._get_base_path(self._cluster.path)
            for attribute, key in (("cert_file", "clientCertificateData"),
                                   ("key_file", "clientKeyData")):
                setattr(self, attribute, FileOrData(
                    status, None, data_key_name=key, file_base_path=base,
                    base64_file_content=False, temp_file_path=self._temp_file_path).as_file())
            return True
        raise ConfigException(f"exec: {provider.args[0]!r} answered without a token or a "
                              "client certificate and key")


async def run_exec_plugin(provider: ExecProvider) -> dict[str, Any]:
    """Run the plugin (own process group, no stdin, not interactive) and return its
    ExecCredential ``status``; cancelled, it is killed with its group first."""
    command = provider.args[0]
    info = {"apiVersion": provider.api_version, "kind": "ExecCredential",
            "spec": {"interactive": False}}
    env = {**provider.env, "KUBERNETES_EXEC_INFO": json.dumps(info)}
    spawn = asyncio.ensure_future(asyncio.create_subprocess_exec(
        *provider.args, env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        start_new_session=True))
    try:
        process = await asyncio.shield(spawn)
    except OSError as exc:
        raise ConfigException(f"exec: cannot run {command!r}: {exc}") from exc
    except asyncio.CancelledError:
        # The bound ran out while it started (the plugin forked, its pipes not connected
        # yet): asyncio's own clean-up would kill the plugin alone, then wait for whatever
        # it had spawned to close its pipes. Let the start finish; kill the whole group.
        with suppress(Exception):
            await _kill_group(await spawn)
        raise
    errors = asyncio.ensure_future(
        _read_capped(process.stderr, STDERR_KEPT_BYTES, keep="tail"))
    try:
        stdout, over = await _read_capped(process.stdout, MAX_OUTPUT_BYTES, keep="head")
        if over:  # no credential is that long: a plugin gone wrong, stopped before it fills
            await _kill_group(process)
            raise ConfigException(f"exec: {command!r} printed more than {MAX_OUTPUT_BYTES} "
                                  "bytes, no ExecCredential; killed it and its process group")
        stderr, _ = await errors
        await process.wait()
    except BaseException:
        await _kill_group(process)
        raise
    finally:
        errors.cancel()
    if process.returncode != 0:
        said = " ".join(stderr.decode("utf-8", errors="replace").split())[-STDERR_CHARS:]
        raise ConfigException(f"exec: {command!r} exited {process.returncode}"
                              + (f": {said}" if said else " (no stderr)"))
    try:
        data = json.loads(stdout)
    except ValueError as exc:
        raise ConfigException(f"exec: {command!r} printed no ExecCredential JSON: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("status"), dict):
        raise ConfigException(f"exec: {command!r} printed no ExecCredential status")
    if data.get("apiVersion") != provider.api_version:
        raise ConfigException(f"exec: {command!r} answered apiVersion {data.get('apiVersion')!r}"
                              f", not {provider.api_version!r}")
    return dict(data["status"])


async def _read_capped(stream: asyncio.StreamReader | None, limit: int, *, keep: str,
                       ) -> tuple[bytes, bool]:
    """A pipe read to its end keeping at most ``limit`` bytes: the ``head`` (and True as soon
    as more came: the caller stops the writer) or the ``tail`` (read on to the end)."""
    data = bytearray()
    if stream is None:
        return b"", False
    while chunk := await stream.read(65536):
        data += chunk
        if len(data) > limit:
            if keep == "head":
                return bytes(data[:limit]), True
            del data[:len(data) - limit]
    return bytes(data), False


async def _kill_group(process: asyncio.subprocess.Process) -> None:
    """SIGKILL the plugin's process group (the plugin and what it spawned, which may hold
    its stdout open after it exited) and reap the plugin."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # its own session: the group id is its pid
    with suppress(ProcessLookupError):
        process.kill()  # should the group call have failed
    with suppress(TimeoutError, asyncio.CancelledError):
        await asyncio.wait_for(process.wait(), REAP_S)
