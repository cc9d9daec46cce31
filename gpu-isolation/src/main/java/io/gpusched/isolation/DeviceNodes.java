package io.gpusched.isolation;

import io.gpusched.core.Allocation;
import io.gpusched.core.devices.DeviceNode;
import io.gpusched.core.devices.GpuDeviceNodes;
import io.gpusched.isolation.internal.Libc;
import io.gpusched.isolation.internal.Sys;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Makes an allocation's device nodes (and the vendor's control nodes) inside a job root, {@code root/dev/...}. A job
 * root is the job's to shape, so every step goes through directory file descriptors and never follows a symlink:
 * {@code openat(O_NOFOLLOW|O_DIRECTORY)} for {@code root}, {@code dev} and each sub-directory, {@code mkdirat},
 * {@code mknodat}, {@code fchmodat}/{@code fchownat} with {@code AT_SYMLINK_NOFOLLOW}. A symlink anywhere under the
 * root is refused, never followed. Refuses to replace a path that is not the same device; {@link Created#remove()}
 * removes exactly what it made (and only while it is still that device).
 */
public final class DeviceNodes {

    /**
     * Nodes made by {@link #create}.
     *
     * @param root the job root
     * @param made the paths created under it (pre-existing identical nodes are not listed)
     */
    public record Created(Path root, List<Path> made) implements AutoCloseable {
        /** Copies the list. */
        public Created {
            made = List.copyOf(made);
        }

        /**
         * Removes the nodes this call made, walking from the root through no-follow directory fds: a directory that
         * became a symlink is not followed, so nothing outside the root is removed.
         */
        public void remove() {
            for (int i = made.size() - 1; i >= 0; i--) {
                Path rel = root.relativize(made.get(i));
                int rootFd = -1;
                int fd = -1;
                try {
                    rootFd = Sys.openDirectoryNoFollow(-100, root.toAbsolutePath().toString());
                    fd = walk(rootFd, rel);
                    Sys.unlinkAt(fd, rel.getFileName().toString());
                } catch (Sys.ErrnoException | RuntimeException ignored) {
                    // already gone, the root was removed, or a directory became a symlink: nothing of ours to remove
                } finally {
                    if (fd != rootFd) {
                        Sys.close(fd);
                    }
                    Sys.close(rootFd);
                }
            }
        }

        private static int walk(int rootFd, Path rel) throws Sys.ErrnoException {
            int fd = rootFd;
            for (int i = 0; i < rel.getNameCount() - 1; i++) {
                int next;
                try {
                    next = Sys.openDirectoryNoFollow(fd, rel.getName(i).toString());
                } finally {
                    if (fd != rootFd) {
                        Sys.close(fd);
                    }
                }
                fd = next;
            }
            return fd;
        }

        @Override
        public void close() {
            remove();
        }
    }

    private DeviceNodes() {
    }

    /** Creates the nodes for an allocation from the host's {@code /dev} and {@code /proc}, mode 0666. */
    public static Created create(Path root, Allocation allocation) {
        NodePlan plan = NodePlan.of(new GpuDeviceNodes(Path.of("/dev"), Path.of("/proc"), false).plan(allocation,
                allocation.devices()));
        return create(root, Path.of("/dev"), plan, 0666);
    }

    /**
     * Creates the plan's allowed nodes under {@code root}, keeping their path relative to {@code devRoot}.
     *
     * @param mode permission bits (e.g. 0666)
     * @throws IsolationException if a path exists and is not the same char device, a directory on the way is a
     *                            symlink, or mknod fails (what was made before is removed)
     */
    public static Created create(Path root, Path devRoot, NodePlan plan, int mode) {
        return create(root, devRoot, plan, mode, -1, -1);
    }

    /**
     * As {@link #create(Path, Path, NodePlan, int)}, also giving the nodes an owner.
     *
     * @param uid owner, -1 to keep root
     * @param gid group, -1 to keep root's
     */
    public static Created create(Path root, Path devRoot, NodePlan plan, int mode, int uid, int gid) {
        if (!Sys.available()) {
            throw new IsolationException("cannot make device nodes: " + Libc.Holder.failure());
        }
        List<Path> made = new ArrayList<>();
        int rootFd;
        try {
            rootFd = Sys.openDirectoryNoFollow(-100, root.toAbsolutePath().toString());
        } catch (Sys.ErrnoException e) {
            if (e.errno() != Sys.ENOENT) {
                throw refused(root, e);
            }
            try {
                Files.createDirectories(root);
                rootFd = Sys.openDirectoryNoFollow(-100, root.toAbsolutePath().toString());
            } catch (IOException | Sys.ErrnoException again) {
                throw new IsolationException("cannot make job root " + root + ": " + again.getMessage(), again);
            }
        }
        try {
            for (DeviceNode n : plan.allowed()) {
                Path rel = Path.of("dev").resolve(devRoot.relativize(n.path()).toString());
                if (rel.normalize().startsWith("..") || rel.toString().contains("..")) {
                    throw new IsolationException("device node " + n.path() + " is not under " + devRoot);
                }
                Path target = root.resolve(rel);
                int dirFd = openParents(rootFd, root, rel);
                try {
                    String name = rel.getFileName().toString();
                    try {
                        Sys.mknodCharAt(dirFd, name, mode, n.major(), n.minor());
                    } catch (Sys.ErrnoException e) {
                        if (e.errno() != Sys.EEXIST) {
                            throw new IsolationException("mknod " + target + " c " + n.major() + " " + n.minor()
                                    + " failed: " + e.getMessage(), e);
                        }
                        if (!sameCharDevice(Sys.fdPath(dirFd).resolve(name), n)) {
                            throw new IsolationException("refusing to replace " + target + ": it exists and is not"
                                    + " char device " + n.major() + ":" + n.minor());
                        }
                        continue;
                    }
                    made.add(target);
                    // The job may rename anything over the new name between mknodat and the chmod (a hard link to
                    // a host file on the same filesystem): pin the inode with an O_PATH fd, check it is the node we
                    // made, and change mode and owner through that fd only, never by name.
                    int nodeFd = -1;
                    try {
                        nodeFd = Sys.openPathNoFollow(dirFd, name);
                        if (!sameCharDevice(Sys.fdPath(nodeFd), n, true)) {
                            throw new IsolationException("refusing to set the mode of " + target + ": it was replaced"
                                    + " by something that is not char device " + n.major() + ":" + n.minor()
                                    + " while it was made");
                        }
                        Sys.chmodFd(nodeFd, mode);
                        if (uid >= 0 || gid >= 0) {
                            Sys.chownFd(nodeFd, uid, gid);
                        }
                    } catch (Sys.ErrnoException e) {
                        throw new IsolationException("setting mode/owner of " + target + " failed: " + e.getMessage(),
                                e);
                    } finally {
                        Sys.close(nodeFd);
                    }
                } finally {
                    Sys.close(dirFd);
                }
            }
        } catch (IOException | IsolationException e) {
            new Created(root, made).remove();
            throw e instanceof IsolationException ie ? ie
                    : new IsolationException("cannot make device nodes under " + root + ": " + e.getMessage(), e);
        } finally {
            Sys.close(rootFd);
        }
        return new Created(root, made);
    }

    /** Walks (making where absent) the directories of {@code rel} below the root fd, never following a symlink. */
    private static int openParents(int rootFd, Path root, Path rel) {
        int fd = rootFd;
        Path at = root;
        for (int i = 0; i < rel.getNameCount() - 1; i++) {
            String part = rel.getName(i).toString();
            at = at.resolve(part);
            int next;
            try {
                Sys.mkdirAt(fd, part, 0755);
                next = Sys.openDirectoryNoFollow(fd, part);
            } catch (Sys.ErrnoException e) {
                if (fd != rootFd) {
                    Sys.close(fd);
                }
                throw refused(at, e);
            }
            if (fd != rootFd) {
                Sys.close(fd);
            }
            fd = next;
        }
        if (fd == rootFd) {
            try {
                return Sys.openDirectoryNoFollow(rootFd, ".");
            } catch (Sys.ErrnoException e) {
                throw refused(root, e);
            }
        }
        return fd;
    }

    private static IsolationException refused(Path p, Sys.ErrnoException e) {
        boolean link = e.errno() == Sys.ELOOP || e.errno() == Sys.ENOTDIR;
        return new IsolationException((link ? "refusing to follow " + p + ": it is a symlink or not a directory"
                : "cannot open " + p) + " (" + e.getMessage() + "); device nodes are made only in real directories"
                + " of the job root", e);
    }

    static boolean sameCharDevice(Path p, DeviceNode n) throws IOException {
        return sameCharDevice(p, n, false);
    }

    /** @param throughFdLink p is a /proc/self/fd link to follow (to the inode the fd holds) */
    static boolean sameCharDevice(Path p, DeviceNode n, boolean throughFdLink) throws IOException {
        LinkOption[] o = throughFdLink ? new LinkOption[0] : new LinkOption[]{LinkOption.NOFOLLOW_LINKS};
        int m = (Integer) Files.getAttribute(p, "unix:mode", o);
        long rdev = (Long) Files.getAttribute(p, "unix:rdev", o);
        return (m & 0xF000) == Libc.S_IFCHR && rdev == Libc.makedev(n.major(), n.minor());
    }
}
