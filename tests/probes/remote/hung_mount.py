"""A real hung mount for tests: a FUSE file system whose daemon never answers.

The kernel's FUSE protocol spoken directly on ``/dev/fuse`` (no libfuse): the daemon answers
INIT and the root's GETATTR, so the mount comes up and its root can be stat'ed, and then never
answers anything else (LOOKUP, OPENDIR, OPEN, READ...) and ignores INTERRUPT. A process that
touches the mount past its root then waits in ``request_wait_answer`` in state D: no signal
but SIGKILL ends the wait before the daemon answers, and once the daemon has read the
request not even that, as on a hard NFS or Lustre mount whose server went away. Ending the
daemon (closing its ``/dev/fuse``) ends every waiting call with ENOTCONN. Needs root.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

_DAEMON = r'''
import ctypes, os, struct, sys, time
mnt, uid, gid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fd = os.open("/dev/fuse", os.O_RDWR)
libc = ctypes.CDLL(None, use_errno=True)
opts = ("fd=%d,rootmode=40755,user_id=0,group_id=0,allow_other" % fd).encode()
if libc.mount(b"hungfs", mnt.encode(), b"fuse.hungfs", 0x2 | 0x4, opts) != 0:
    sys.exit("mount: " + os.strerror(ctypes.get_errno()))
now = int(time.time())
root = struct.pack("<QQQQQQIIIIIIIIII", 1, 0, 0, now, now, now, 0, 0, 0, 0o40755, 2, uid, gid,
                   0, 4096, 0)
print("mounted", flush=True)
while True:
    try:
        req = os.read(fd, (1 << 20) + 4096)
    except OSError:
        break  # unmounted
    opcode, unique, node = struct.unpack_from("<IQQ", req, 4)
    if opcode == 26:  # INIT
        minor, readahead = struct.unpack_from("<II", req, 44)
        out = struct.pack("<IIIIHHIIHHI", 7, min(minor, 31), readahead, 0, 16, 12, 4096, 1, 1,
                          0, 0) + bytes(28)
    elif opcode == 3 and node == 1:  # GETATTR of the root
        out = struct.pack("<QII", 1, 0, 0) + root
    else:
        continue  # never answered
    os.write(fd, struct.pack("<IiQ", 16 + len(out), 0, unique) + out)
'''


@contextlib.contextmanager
def hung_mount(path: Path, uid: int = 0, gid: int = 0, *,
               release_after: float = 120.0) -> Iterator[Path]:
    """``path`` (an empty directory) as a hung mount owned by ``uid``, until the block ends or
    ``release_after`` seconds have passed (so a test of code that waits on it still ends)."""
    daemon = subprocess.Popen([sys.executable, "-c", _DAEMON, str(path), str(uid), str(gid)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
    release = threading.Timer(release_after, daemon.kill)
    release.start()
    try:
        assert daemon.stdout is not None
        line = daemon.stdout.readline()
        assert line.strip() == "mounted", daemon.stderr.read() if daemon.stderr else line
        yield path
    finally:
        release.cancel()
        daemon.kill()  # every call waiting on the mount now fails with ENOTCONN
        daemon.wait(timeout=30)
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False,
                       timeout=30)
