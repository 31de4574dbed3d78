"""A real disk that fails on demand: an ext4 filesystem on a loop device over a sparse file,
shut down with the kernel's EXT4_IOC_SHUTDOWN ioctl (what `xfs_io -c shutdown` does). After it
every write, fsync and read on that filesystem fails with EIO, as on a disk that died. Used by
test_disk_failure.py (one node) and test_jbod.py (a cluster whose nodes have two such disks).

Why not the other ways: `mount -o remount,ro` under a running broker fails with EBUSY (files
are open for writing), this kernel has no device-mapper (no dm-error target), and libfiu's
LD_PRELOAD would not reach the JVM's and RocksDB's I/O the same way on both brokers. The
shutdown syncs the filesystem first (flag 0, EXT4_GOING_FLAGS_DEFAULT), so what was written
before the fault is on the device. Needs root (losetup, mount)."""

import fcntl
import os
import struct
import subprocess

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
