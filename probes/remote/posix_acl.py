"""A file's POSIX access ACL, as the kernel keeps it, for the guard's permission checks.

Policy: STANDARD LIBRARY ONLY, self-contained and Python 3.7+ compatible (shipped in front of
``guard`` inside the collector and rollout scripts, see ``probes.remote.script``). The ACL is
read from Linux's ``system.posix_acl_access`` xattr of an fd or a path (version 2, then 8
bytes an entry); anything unreadable, malformed or absent reads as no ACL, so the mode bits
decide (``Guard._permits``). A named user's or a group's entry is granted only under the
ACL's mask, as the kernel's ``posix_acl_permission`` applies it (``Guard._acl_permits``).
"""

from __future__ import annotations

import os
import struct

_ACL_XATTR = "system.posix_acl_access"
_ACL_USER_OBJ, _ACL_USER, _ACL_GROUP_OBJ, _ACL_GROUP, _ACL_MASK, _ACL_OTHER = (
    0x01, 0x02, 0x04, 0x08, 0x10, 0x20)


def _access_acl(target: int | str) -> list[tuple[int, int, int]] | None:
    """``(tag, permission bits, uid or gid)`` of the POSIX access ACL of an fd or a path
    (Linux's xattr: version 2, then 8 bytes an entry); ``None`` when it has none (the mode
    bits say it all), the file system keeps none, or it cannot be read."""
    getxattr = getattr(os, "getxattr", None)
    if getxattr is None:
        return None
    try:
        blob = getxattr(target, _ACL_XATTR)
    except OSError:  # ENODATA: no ACL; EOPNOTSUPP: none on this file system
        return None
    if len(blob) < 12 or (len(blob) - 4) % 8 or struct.unpack_from("<I", blob)[0] != 2:
        return None
    return [struct.unpack_from("<HHI", blob, offset) for offset in range(4, len(blob), 8)]


def _masked(acl: list[tuple[int, int, int]], index: int, perm: int) -> int:
    """``perm`` of the entry at ``index`` under the ACL's mask (which follows it, sorted)."""
    for tag, mask, _ in acl[index + 1:]:
        if tag == _ACL_MASK:
            return perm & mask
    return perm
