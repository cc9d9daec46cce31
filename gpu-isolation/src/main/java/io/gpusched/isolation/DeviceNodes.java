package io.gpusched.isolation;

import io.gpusched.core.Allocation;
import io.gpusched.isolation.internal.Libc;
import io.gpusched.isolation.internal.Sys;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Makes an allocation's device nodes (and the vendor's control nodes) inside a job root, {@code root/dev/...}, with
 * {@code mknod(2)}. Refuses to replace a path that is not the same device; {@link Created#remove()} removes exactly
 * what it made.
 */
public final class DeviceNodes {

    /**
     * Nodes made by {@link #create}.
     *
     * @param made the paths created (pre-existing identical nodes are not listed)
     */
    public record Created(List<Path> made) implements AutoCloseable {
        /** Copies the list. */
        public Created {
            made = List.copyOf(made);
        }

        /** Removes the nodes this call made. */
        public void remove() {
            for (int i = made.size() - 1; i >= 0; i--) {
                try {
                    Files.deleteIfExists(made.get(i));
                } catch (IOException ignored) {
                    // already gone or the root was removed
                }
            }
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
        NodePlan plan = new GpuDeviceNodes(Path.of("/dev"), Path.of("/proc"), false).plan(allocation,
                allocation.devices());
        return create(root, Path.of("/dev"), plan, 0666);
    }

    /**
     * Creates the plan's allowed nodes under {@code root}, keeping their path relative to {@code devRoot}.
     *
     * @param mode permission bits (e.g. 0666)
     * @throws IsolationException if a path exists and is not the same char device, or mknod fails (what was made
     *                            before is removed)
     */
    public static Created create(Path root, Path devRoot, NodePlan plan, int mode) {
        if (!Sys.available()) {
            throw new IsolationException("cannot make device nodes: " + Libc.Holder.failure());
        }
        List<Path> made = new ArrayList<>();
        try {
            for (DeviceNode n : plan.allowed()) {
                Path target = root.resolve("dev").resolve(devRoot.relativize(n.path()).toString());
                if (Files.exists(target, LinkOption.NOFOLLOW_LINKS)) {
                    if (!sameCharDevice(target, n)) {
                        throw new IsolationException("refusing to replace " + target + ": it exists and is not char"
                                + " device " + n.major() + ":" + n.minor());
                    }
                    continue;
                }
                Files.createDirectories(target.getParent());
                try {
                    Sys.mknodChar(target.toString(), mode, n.major(), n.minor());
                } catch (Sys.ErrnoException e) {
                    throw new IsolationException("mknod " + target + " c " + n.major() + " " + n.minor() + " failed: "
                            + e.getMessage(), e);
                }
                made.add(target);
                Files.setPosixFilePermissions(target, java.nio.file.attribute.PosixFilePermissions.fromString(
                        perms(mode)));
            }
        } catch (IOException | IsolationException e) {
            new Created(made).remove();
            throw e instanceof IsolationException ie ? ie
                    : new IsolationException("cannot make device nodes under " + root + ": " + e.getMessage(), e);
        }
        return new Created(made);
    }

    static boolean sameCharDevice(Path p, DeviceNode n) throws IOException {
        int m = (Integer) Files.getAttribute(p, "unix:mode", LinkOption.NOFOLLOW_LINKS);
        long rdev = (Long) Files.getAttribute(p, "unix:rdev", LinkOption.NOFOLLOW_LINKS);
        return (m & 0xF000) == Libc.S_IFCHR && rdev == Libc.makedev(n.major(), n.minor());
    }

    private static String perms(int mode) {
        String s = "rwxrwxrwx";
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < 9; i++) {
            b.append((mode & (1 << (8 - i))) != 0 ? s.charAt(i) : '-');
        }
        return b.toString();
    }
}
