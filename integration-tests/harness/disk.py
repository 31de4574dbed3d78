"""Disks the disk-fault tests mount under a broker's log.dirs (root needed: mount, losetup).

A small disk that fills: a tmpfs of a given size (`Tmpfs`), filled by a filler file (`fill`).
Used by test_disk_full.py (one node) and test_cluster_disk_faults.py (one node of three).

A damaged segment: `batch_positions` finds the record batches of a segment file (the same
format on both brokers), for test_corrupt_files.py and test_cluster_disk_faults.py to flip a
byte in one.

A real disk that fails on demand: an ext4 filesystem on a loop device over a sparse file,
shut down with the kernel's EXT4_IOC_SHUTDOWN ioctl (what `xfs_io -c shutdown` does). After it
every write, fsync and read on that filesystem fails with EIO, as on a disk that died. Used by
test_disk_failure.py (one node) and test_jbod.py (a cluster whose nodes have two such disks).

Why not the other ways: `mount -o remount,ro` under a running broker fails with EBUSY (files
are open for writing), this kernel has no device-mapper (no dm-error target), and libfiu's
LD_PRELOAD would not reach the JVM's and RocksDB's I/O the same way on both brokers. The
shutdown syncs the filesystem first (flag 0, EXT4_GOING_FLAGS_DEFAULT), so what was written
before the fault is on the device. Needs root (losetup, mount)."""

import errno
import fcntl
import os
import struct
import subprocess
from pathlib import Path

# Room for Brook's two RocksDB stores, which preallocate their WAL and MANIFEST (~150 MB
# together on a fresh node; Kafka's fresh log dir takes kilobytes).
TMPFS_SIZE = "256m"


class Tmpfs:
    """A tmpfs of `size` (mount's size option, e.g. "256m") mounted at `mount_point`."""

    def __init__(self, mount_point: Path, size: str = TMPFS_SIZE):
        self.mount_point = Path(mount_point)
        self.mount_point.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(self.mount_point)], check=True)

    def remove(self):
        subprocess.run(["umount", str(self.mount_point)], check=True)


def free_bytes(path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def fill(path: Path, leave: int = 0) -> Path:
    """A filler file in directory `path` allocating every free byte of its filesystem but
    `leave` (the broker may write meanwhile: a smaller allocation is tried then). Returns it;
    deleting it frees the space."""
    filler = Path(path) / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while (size := free_bytes(path) - leave) > 0:
            try:
                os.posix_fallocate(fd, os.fstat(fd).st_size, size)
                break
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
    finally:
        os.close(fd)
    return filler


def batch_positions(segment: bytes) -> list:
    """(position, size) of each record batch in a segment file (Kafka's format: base offset
    i64, batch length i32 counting the bytes after it)."""
    out, position = [], 0
    while position + 12 <= len(segment):
        (length,) = struct.unpack_from(">i", segment, position + 8)
        out.append((position, 12 + length))
        position += 12 + length
    return out


# EXT4_IOC_SHUTDOWN = _IOR('X', 125, __u32); flag 0 syncs the filesystem, then fails all I/O.
EXT4_IOC_SHUTDOWN = 0x8004587D
EXT4_GOING_FLAGS_DEFAULT = 0
# Sparse: Brook's RocksDB stores preallocate ~150 MB on a fresh node.
IMAGE_BYTES = 512 * 1024 * 1024


class Ext4Disk:
    """An ext4 filesystem on a loop device over a sparse file, mounted at `mount_point`."""

    def __init__(self, image, mount_point):
        self.image, self.mount_point = image, mount_point
        with open(image, "wb") as f:
            f.truncate(IMAGE_BYTES)
        self.device = subprocess.run(["losetup", "-f", "--show", str(image)], check=True,
                                     capture_output=True, text=True).stdout.strip()
        subprocess.run(["mkfs.ext4", "-q", self.device], check=True)
        self.mount_point.mkdir(parents=True, exist_ok=True)
        self.mount()
        # Kafka refuses to start on a log dir holding a directory not named like a partition.
        (self.mount_point / "lost+found").rmdir()

    def mount(self):
        subprocess.run(["mount", self.device, str(self.mount_point)], check=True)

    def fail(self):
        """Every later I/O on the filesystem fails with EIO (after a sync of what was written)."""
        fd = os.open(self.mount_point, os.O_RDONLY)
        try:
            fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN, struct.pack("I", EXT4_GOING_FLAGS_DEFAULT))
        finally:
            os.close(fd)

    def replace(self):
        """The disk back: unmount the failed filesystem and mount it again (journal replayed)."""
        subprocess.run(["umount", str(self.mount_point)], check=True)
        self.mount()

    def remove(self):
        subprocess.run(["umount", str(self.mount_point)], check=False)
        subprocess.run(["losetup", "-d", self.device], check=False)
