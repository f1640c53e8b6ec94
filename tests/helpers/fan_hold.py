#!/usr/bin/env python3
"""fan_hold.py DIR PIDFILE RELEASE: hold the first open of directory DIR.

A deterministic stall for a test (root only: fanotify permission events).
DIR is marked for FAN_OPEN_PERM; the first process that opens it waits
in open(2) until the file RELEASE exists. Its pid is written to PIDFILE
once it waits (the test reads who is held: the parent of a split daemon,
or a child of its). Every later open is allowed at once. "ready" on
standard output once the mark is in place; the helper exits when DIR is
gone or after 120 seconds.
"""
import ctypes
import os
import select
import struct
import sys
import time

FAN_CLOEXEC = 0x1
FAN_CLASS_CONTENT = 0x4
FAN_MARK_ADD = 0x1
FAN_OPEN_PERM = 0x10000
FAN_ONDIR = 0x40000000
FAN_ALLOW = 1
AT_FDCWD = -100
META = struct.Struct("IBBHQii")  # event_len, vers, reserved, metadata_len, mask, fd, pid


def main():
    path, pidfile, release = sys.argv[1:4]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64,
                                   ctypes.c_int, ctypes.c_char_p]
    fan = libc.fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC, os.O_RDONLY)
    if fan < 0:
        sys.exit("fanotify_init: " + os.strerror(ctypes.get_errno()))
    if libc.fanotify_mark(fan, FAN_MARK_ADD, FAN_OPEN_PERM | FAN_ONDIR, AT_FDCWD,
                          path.encode()) < 0:
        sys.exit("fanotify_mark: " + os.strerror(ctypes.get_errno()))
    print("ready", flush=True)
    held = False
    end = time.monotonic() + 120
    while time.monotonic() < end:
        r, _, _ = select.select([fan], [], [], 0.1)
        if not r:
            if not os.path.exists(path):
                break
            continue
        buf = os.read(fan, 4096)
        off = 0
        while off + META.size <= len(buf):
            elen, _, _, _, _, fd, pid = META.unpack_from(buf, off)
            off += elen
            if not held:
                held = True
                with open(pidfile + ".tmp", "w") as f:
                    f.write("%d\n" % pid)
                os.rename(pidfile + ".tmp", pidfile)
                while not os.path.exists(release) and time.monotonic() < end:
                    time.sleep(0.05)
            os.write(fan, struct.pack("iI", fd, FAN_ALLOW))
            os.close(fd)


if __name__ == "__main__":
    main()
