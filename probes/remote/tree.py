"""Checkpoint trees of a job on the login node: bounded listings, small reads.

Policy: STANDARD LIBRARY ONLY, self-contained and Python 3.7+ compatible (shipped inside the
collector script, see ``probes.remote.script``). Only the known layouts are read, never an
unbounded walk (no find/du): from each root, ``CKPT_DEPTH`` levels of plain directories are
searched for step directories (verl ``<root>/<project>/<experiment>/global_step_N``, Hugging
Face ``checkpoint-N``, DeepSpeed ``global_stepN``, Megatron ``iter_0000N``, SkyRL
``global_step_N``; which count: ``probes.remote.checkpoint_steps``) and their trackers
(``latest_checkpointed_iteration.txt``, DeepSpeed's ``latest``, SkyRL's
``latest_ckpt_global_step.txt``); a step directory is never entered, and at most
``CKPT_VISITS`` directories are listed per root. The checkpoint directories the trainer
printed in its log or the job's command line names (``probes.remote.logged_paths``) are
searched too: inside the job's workdir or a configured root, entered from there component by
component; outside them, each a root of its own, opened as a root is and listed alone (its
``exports/`` and trainer-role directories too, as any searched directory's), where only the
job user's own steps count (a log naming a teammate's folder banks none of theirs). Trial
trees are ``probes.remote.trial_roots``.

Every open and listing goes through :mod:`probes.remote.guard`: a directory below a root is
entered through its parent's descriptor without following a link (a root that is itself a
link is followed to a directory the job's user could list: ``Guard.open_root``), and a read
that is refused or hangs leaves that entry out (a listing that fails says why in ``errors``).
Each directory is listed once per request and owner (``SEEN``), however many jobs name it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import time
from typing import Any, Dict  # noqa: UP035 - Python 3.7 on login nodes

# In-process these are imported; when shipped, their sources are prepended to the script and
# each import line below is replaced by ``pass`` (probes.remote.script).
with contextlib.suppress(ImportError):
    from probes.remote.guard import Guard, Hung, Refused, deadline, forbidden_path
with contextlib.suppress(ImportError):
    from probes.remote.checkpoint_steps import (
        _MARKERS,
        _STEP_DIR,
        _STEP_FILE,
        MARKER_BYTES,
        _finished_dcp,
        _finished_hf,
        _mtimes,
        _owned,
        _unfinished_marker,
        numbered_saves,
    )
with contextlib.suppress(ImportError):
    from probes.remote.logged_paths import logged_checkpoint_dirs

CKPT_DEPTH = 2
"""Plain directory levels searched below a checkpoint root (verl's project/experiment)."""
ROLE_DIRS = ("actor", "critic", "_actor", "_critic")
"""A trainer role's directory one level past ``CKPT_DEPTH``: verl 0.1 saved
``<project>/<experiment>/actor/global_step_N`` (and ``critic/``), before its step directories
held the roles (``global_step_N/actor``); OpenRLHF saves DeepSpeed's ``global_stepN`` under
``<ckpt_path>/_actor`` (and ``_critic``)."""
CKPT_VISITS = 256
"""Directories listed per checkpoint root at most (a tensorboard ``runs/`` tree is not one)."""

Json = Dict[str, Any]  # noqa: UP006 - evaluated at run time; builtin generics need 3.9

SEEN: dict[str, Any] = {}
"""Per-request memo: jobs of one chain or grid share workdirs, checkpoint and trial roots, and
each directory (or trial tree) is read once per sweep (per owner) however many jobs name it."""


def listdir(path: str, guard: Guard, errors: Json | None = None) -> list[str] | None:
    """The directory's names, or ``None`` (the reason in ``errors[path]`` when it exists).

    No count cap: the guard's deadline bounds the listing."""
    key = f"ls:{guard.uid}:{path}"
    if key not in SEEN:
        try:
            SEEN[key] = guard.list_dir(path, sys.maxsize)
        except FileNotFoundError:
            SEEN[key] = None
        except (OSError, Refused, Hung) as exc:
            SEEN[key] = str(exc)
    listing = SEEN[key]
    if isinstance(listing, str):
        if errors is not None:
            errors[path] = listing
        return None
    return listing  # type: ignore[no-any-return]


def _entries(fd: int, path: str, guard: Guard) -> list[tuple[str, bool]]:
    """``(name, is a plain directory)`` for an open directory, sorted; links are not dirs."""
    found: list[tuple[str, bool]] = []
    with deadline(guard._seconds(), f"list {path}"), os.scandir(fd) as it:
        for entry in it:
            try:
                found.append((entry.name, entry.is_dir(follow_symlinks=False)))
            except OSError:
                continue
    return sorted(found)



class _Walk:
    """One request's checkpoint answer, filled directory by directory."""

    def __init__(self, guard: Guard) -> None:
        self.guard = guard
        self.out: Json = {"listings": {}, "exports": {}, "markers": {}, "written": {},
                          "exports_written": {}}
        self.errors: Json = {}
        self.visits = 0
        self.logged = False
        """Searching a save folder the run's log names, or a root naming the run (see
        ``_owned``)."""
        self.watch: list[tuple[str, os.stat_result]] | None = None
        """When kept (a folder searched for a cursor, see :func:`_folder`): what the answer
        rests on beyond the entries of the directories listed, as ``(path below the
        searched folder, its stat)``."""
        self.top = ""
        """The searched folder (``watch`` paths are below it)."""

    def _note(self, path: str, st: os.stat_result) -> None:
        if self.watch is not None:
            self.watch.append((path[len(self.top) + 1:] if path != self.top else "", st))

    def _note_names(self, fd: int, path: str, names: list[str]) -> None:
        """Note the entries ``names`` of the open directory ``fd`` (``path``), once each; one
        that cannot be (gone meanwhile, hung) leaves the folder unkept, its answer as read."""
        if self.watch is None or not names:
            return
        try:
            with deadline(self.guard._seconds(), f"stat in {path}"):
                for name in dict.fromkeys(names):
                    self._note(os.path.join(path, name),
                               os.stat(name, dir_fd=fd, follow_symlinks=False))
        except (OSError, Hung):
            self.watch = None

    def search(self, path: str, fd: int, depth: int) -> None:
        """List one open directory; descend ``depth`` more levels of plain directories."""
        self.visits += 1
        try:
            entries = _entries(fd, path, self.guard)
            seen: list[str] | None = [] if self.watch is not None else None
            numbered = numbered_saves(fd, path, [n for n, is_dir in entries if is_dir],
                                      self.guard, seen)
            steps = _owned(fd, path, [n for n, is_dir in entries
                                      if (_STEP_DIR if is_dir else _STEP_FILE).match(n)]
                           + numbered, self.guard, self.logged)
            steps = _finished_hf(fd, path, steps, self.guard, seen)
            steps = _finished_dcp(fd, path, steps, self.guard, seen)
            files = {n for n, is_dir in entries if not is_dir}
            steps = [n for n in steps if _unfinished_marker(n) not in files]
            written = _mtimes(fd, path, steps, self.guard)
            if seen is not None:
                # The saves looked into (one finishing changes only itself) and the newest
                # written (a save still being written: its mtime), besides the directory.
                newest = [max(written, key=written.__getitem__)] if written else []
                self._note_names(fd, path, seen + newest)
                self._note_names(fd, path, [m for m in _MARKERS if m in files])
        except (OSError, Refused, Hung) as exc:
            self.errors[path] = str(exc)
            return
        if steps:
            self.out["listings"][path] = steps
            self.out["written"][path] = written
        for marker in _MARKERS:
            if marker in files and path not in self.out["markers"]:
                text = read_small(marker, self.guard, MARKER_BYTES, dir_fd=fd)
                if text is not None:
                    self.out["markers"][path] = text.decode("utf-8", "replace").strip()
        for name, is_dir in entries:
            if not is_dir or _STEP_DIR.match(name) or name in numbered or name.startswith("."):
                continue
            beyond = name == "exports" or (
                name in ROLE_DIRS and depth == 0 and self.visits < CKPT_VISITS)
            if not beyond and (depth <= 0 or self.visits >= CKPT_VISITS):
                continue
            self._enter(path, fd, name, depth - 1)
        if depth > 0 and self.visits >= CKPT_VISITS:
            self.errors[path] = f"search stopped after {CKPT_VISITS} directories"

    def _enter(self, path: str, fd: int, name: str, depth: int) -> None:
        child = os.path.join(path, name)
        try:
            with self.guard.directory(name, dir_fd=fd) as sub:
                if self.watch is not None:
                    self._note(child, os.fstat(sub))
                if name == "exports":
                    names = [n for n, d in _entries(sub, child, self.guard) if d]
                    self.out["exports"][path] = _owned(
                        sub, child, [n for n in names if _STEP_DIR.match(n)], self.guard,
                        self.logged)
                    written = self.out["exports_written"][path] = _mtimes(
                        sub, child, self.out["exports"][path], self.guard)
                    if written:
                        self._note_names(sub, child, [max(written, key=written.__getitem__)])
                else:
                    self.search(child, sub, depth)
        except (OSError, Refused, Hung) as exc:
            self.errors[child] = str(exc)

    def root(self, root: str, depth: int, below: list[str] | None = None) -> None:
        """Search ``root`` (or the directory ``below`` it, entered component by component)."""
        self.visits = 0
        try:
            fd = self.guard.open_root(root)
        except (FileNotFoundError, NotADirectoryError):
            return  # (a root that is a file or a FIFO, or below one, holds no checkpoints)
        except (OSError, Refused) as exc:
            self.errors[root] = str(exc)
            return
        path = root
        try:
            for part in below or []:
                sub = self.guard.open(part, directory=True, dir_fd=fd)
                os.close(fd)
                fd, path = sub, os.path.join(path, part)
            if self.watch is not None:
                self.top = path
                self._note(path, os.fstat(fd))
            self.search(path, fd, depth)
        except (FileNotFoundError, NotADirectoryError):
            pass
        except (OSError, Refused, Hung) as exc:
            self.errors[path] = str(exc)
        finally:
            os.close(fd)



def collect_checkpoints(roots: list[str], guard: Guard, log_text: str | None = None,
                        workdir: str | None = None, memo: bool = True, *,
                        run_roots: list[str] | None = None,
                        command: str | None = None,
                        logged: list[tuple[str, list[str]]] | None = None,
                        carried: Any = None, keep: list[Json] | None = None,
                        head: str | None = None) -> Json:
    """Step directories, trackers and exports under every root and every directory the log
    or ``command`` (the job's command line) names (``memo``: each root searched once per
    request, see ``SEEN``). ``run_roots``: those of ``roots`` specific to the run (a template
    naming it, ``{name}``/``{job_id}``), searched as a folder its log names: another owner's
    steps count there (``_owned``). ``logged``: those directories, when the caller has
    placed them already (``logged_paths.resumed_checkpoint_dirs``). A tracked read (the
    bot's warm sweep) gives ``keep``, a list this read's folder records go to, and the ones
    its cursor brought in ``carried``: a named folder unchanged since is not searched again
    (:func:`_folder`). ``head``: a long log's first bytes beside ``log_text``, its tail."""
    walk = _Walk(guard)
    own = set(run_roots or ())
    for root in roots:
        key = f"ck:{guard.uid}:{'run' if root in own else ''}:{root}"
        if key not in SEEN or not memo:
            part = _Walk(guard)
            part.logged = root in own
            part.root(root, CKPT_DEPTH)
            parent = os.path.dirname(os.path.normpath(root))
            # SkyRL's defaults put exports beside the checkpoints (~/ckpts, ~/exports).
            sibling = os.path.join(parent, "exports")
            if root.startswith("/") and parent != "/" and not os.path.normpath(root).endswith(
                    "/exports"):
                sib = _Walk(guard)
                sib.root(sibling, 0)
                if sib.out["listings"].get(sibling):
                    part.out["exports"][root] = sib.out["listings"][sibling]
                    part.out["exports_written"][root] = sib.out["written"].get(sibling, {})
            SEEN[key] = (part.out, part.errors)
        out, errors = SEEN[key]
        for field in ("listings", "exports", "markers", "written", "exports_written"):
            walk.out[field].update(out[field])
        walk.errors.update(errors)
    bases = [b for b in [workdir, *roots] if b]
    if logged is None:
        logged = logged_checkpoint_dirs(log_text, bases, workdir, command, head)
    inside = {os.path.normpath(b) for b in bases}
    records = _records(carried)
    for base, below in logged:
        # A folder outside the workdir and roots is a root of its own, named by the job
        # owner's text: only the job user's own steps count there (_owned), where a folder
        # the log names inside them keeps another owner's (an object-store mount's uid).
        others = bool(below) or os.path.normpath(base) in inside
        out, errors = _folder(guard, [base, list(below), others], records, keep)
        for field in ("listings", "exports", "markers", "written", "exports_written"):
            walk.out[field].update(out[field])
        walk.errors.update(errors)
    out = walk.out
    if logged:
        # The run's own save folders: the banked step is read from these when they hold
        # steps (probes.slurm.checkpoints.build_listing), not from other runs' beside them;
        # a named folder's role directories (OpenRLHF's _actor) are its own too.
        named = [os.path.join(base, *below) for base, below in logged]
        out["logged"] = named + [os.path.join(d, r) for d in named for r in ROLE_DIRS
                                 if os.path.join(d, r) in out["listings"]]
        _drop_beside(out, logged)
    if walk.errors:
        out["errors"] = walk.errors
    return out


SETTLED_S = 2.0
"""Seconds a watched entry's mtime must lie before a folder's search for the folder to be
kept: a change within the same tick of a coarse clock (1 s on some NFS servers) as the one
read would leave its stamp as it was (git's "racily clean" entries)."""
KEPT_BYTES = 16 << 10
"""Bytes of folder records one cursor carries at most (the stored state's bound is
``probes.slurm.cursors.MAX_STATE_BYTES``); a folder past it is searched every time."""
KEPT_FS = frozenset(("ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "tmpfs", "nfs", "nfs4",
                     "lustre", "gpfs", "beegfs", "ceph"))
"""File systems whose directory mtime moves with every entry made, removed or renamed. An
NFS client's cached mtime is what revalidates its cached listing too. A FUSE mount (an
object store's: s3fs, gcsfuse, mountpoint-s3) may keep a directory's mtime while objects come
and go, and an unknown one may: their folders are searched every time."""
_FS_TYPES: dict[int, str] = {}


def _fs_type(dev: int) -> str:
    """The file system type of the mount device ``dev`` (``/proc/self/mountinfo``; ``""``
    when unknown: a btrfs subvolume below its mount, no /proc)."""
    if not _FS_TYPES:
        _FS_TYPES[-1] = ""
        with contextlib.suppress(OSError, ValueError, IndexError), \
                open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as mounts:
            for line in mounts:
                fields = line.split()
                major, minor = fields[2].split(":")
                _FS_TYPES[os.makedev(int(major), int(minor))] = fields[fields.index("-") + 1]
    return _FS_TYPES.get(dev, "")


def _stamp(guard: Guard, place: list[Any], stats: list[tuple[str, os.stat_result]]) -> str:
    """The digest of what a folder's answer rests on: whose read (the uid, the folder and how
    it is entered) and each watched entry's identity and times."""
    facts = [guard.uid, place, [[rel, st.st_dev, st.st_ino, st.st_mode, st.st_uid,
                                 st.st_mtime_ns, st.st_ctime_ns, st.st_size]
                                for rel, st in stats]]
    return hashlib.sha256(json.dumps(facts).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _records(carried: Any) -> dict[str, Json]:
    """A cursor's folder records by place; anything malformed is dropped (a hint, never
    trusted: a dropped record costs a search)."""
    records: dict[str, Json] = {}
    for record in carried if isinstance(carried, list) else []:
        if not isinstance(record, dict):
            continue
        place, watch, out = record.get("place"), record.get("watch"), record.get("out")
        if (isinstance(place, list) and len(place) == 3 and isinstance(place[0], str)
                and isinstance(place[1], list) and all(isinstance(p, str) for p in place[1])
                and isinstance(place[2], bool) and isinstance(watch, list) and watch
                and all(isinstance(w, str) for w in watch) and watch[0] == ""
                and isinstance(out, dict) and all(isinstance(out.get(f), dict) for f in (
                    "listings", "exports", "markers", "written", "exports_written"))
                and isinstance(record.get("stamp"), str)):
            records[json.dumps(place)] = record
    return records


def _unchanged(guard: Guard, record: Json) -> bool:
    """Whether every entry the record watches is as it was (one stat each, the folder's
    followed as its search opens it, none below; under the guard's deadline)."""
    base, below, _own = record["place"]
    folder = os.path.join(base, *below)
    if not folder.startswith("/") or forbidden_path(folder):
        return False
    try:
        with deadline(guard._seconds(), f"stat in {folder}"):
            stats = [(rel, os.stat(os.path.join(folder, rel), follow_symlinks=not rel))
                     for rel in record["watch"]]
    except (OSError, ValueError, Hung):
        return False
    return bool(_stamp(guard, record["place"], stats) == record["stamp"])


def _folder(guard: Guard, place: list[Any], records: dict[str, Json],
            keep: list[Json] | None) -> tuple[Json, Json]:
    """One named folder's ``(answer, errors)``, ``place`` being ``[base, components below it,
    own]``: searched (``own``: another owner's steps count, see ``_owned``), or, for a
    tracked read (``keep`` given), as the record its cursor brought when nothing the answer
    rests on changed since (:func:`_unchanged`).

    A folder's answer rests on its entries and its subdirectories' (``exports/``, the role
    directories), whose mtimes move with any entry made, removed or renamed; on the tracker
    files read (verl's ``latest_checkpointed_iteration.txt``, DeepSpeed's ``latest``: written
    in place); on the saves looked into for their last file (``trainer_state.json``,
    ``.metadata``), and on the newest written save's mtime. Those are watched; a change
    there, the folder replaced, removed or linked elsewhere, is searched on the very next
    read. An older save's own entries and owner are not re-read (its mtime in ``written``
    is as first read: the completion check, which uses it, reads an ended job whole). A
    folder is kept only where the search met no error, every watched mtime lies
    :data:`SETTLED_S` before it began, on a file system in :data:`KEPT_FS`, within
    :data:`KEPT_BYTES` per cursor."""
    base, below, own = place
    record = records.get(json.dumps(place)) if records else None
    if keep is not None and record is not None and _unchanged(guard, record):
        keep.append(record)
        return record["out"], {}
    walk = _Walk(guard)
    walk.logged = own
    walk.watch = [] if keep is not None else None
    began = time.time()
    walk.root(base, 0, below)
    watch = walk.watch
    if keep is None or walk.errors or not watch or _fs_type(watch[0][1].st_dev) not in KEPT_FS \
            or any(st.st_mtime_ns > (began - SETTLED_S) * 1e9 for _rel, st in watch):
        return walk.out, walk.errors
    record = {"place": place, "watch": [rel for rel, _st in watch],
              "stamp": _stamp(guard, place, watch), "out": walk.out}
    try:  # (a name that is not UTF-8 is not kept: the stored state is UTF-8 JSON)
        size = sum(len(json.dumps(r, ensure_ascii=False).encode("utf-8"))
                   for r in [*keep, record])
    except UnicodeEncodeError:
        return walk.out, walk.errors
    if size <= KEPT_BYTES:
        keep.append(record)
    return walk.out, walk.errors


def _drop_beside(out: Json, logged: list[tuple[str, list[str]]]) -> None:
    """Before the run's first save its named folders hold no step, and every root is read
    (``build_listing``), but for the folders beside a named one below its base: verl's
    ``checkpoints/<project>/<experiment>`` sits among the other experiments of the project, whose
    steps are not the run's (a fresh run at step 20 read another experiment's 500). A folder
    right under its base (the workdir's ``tokenizer``, a root itself) has none such: the
    workdir's other roots beside it are still read."""
    if all(len(below) < 2 for _base, below in logged):
        return  # no folder has any beside it below its base
    named = {os.path.normpath(os.path.join(base, *below)) for base, below in logged}
    if any(out["listings"].get(d) for d in named):
        return  # they hold steps: they alone bank them (build_listing)
    beside = {os.path.normpath(os.path.join(base, *below[:-1]))
              for base, below in logged if len(below) >= 2}
    for field in ("listings", "markers", "exports"):
        for root in [r for r in out[field] if os.path.dirname(os.path.normpath(r)) in beside
                     and os.path.normpath(r) not in named]:
            del out[field][root]


def read_small(path: str, guard: Guard, limit: int = 1 << 20,
               dir_fd: int | None = None) -> bytes | None:
    found = _read_stamped(path, guard, limit, dir_fd)
    return found[0] if found is not None else None


def _read_stamped(path: str, guard: Guard, limit: int = 1 << 20,
                  dir_fd: int | None = None) -> tuple[bytes, float] | None:
    """The file's first ``limit`` bytes and its mtime, both from the one opened descriptor."""
    try:
        return guard.read_small(path, limit, dir_fd=dir_fd)
    except (OSError, Refused, Hung):
        return None
