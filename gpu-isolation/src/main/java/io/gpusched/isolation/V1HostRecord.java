package io.gpusched.isolation;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * The host's exception list of a default-deny v1 cgroup, recorded on disk (one file per cgroup identity, in the
 * node's isolation state directory) before a fence writes its first rule and removed once revoke has given it back.
 * Another process that fences the same cgroup later (the first fencer died, or another scheduler process on the node)
 * reads the host's list from here instead of taking the dead fence's list for the host's, so its revoke gives back
 * the host's policy and not a GPU the dead fence had granted. The directory must be root's alone: whoever can write a
 * record can choose what revoke restores.
 */
final class V1HostRecord {
    private static final String HEADER = "# gpusched v1 host device list of cgroup ";

    private V1HostRecord() {
    }

    static Path file(Path stateDir, CgroupDir.Id id) {
        return stateDir.resolve("v1-" + id.dev() + "-" + id.ino());
    }

    /** @return the recorded host list of this cgroup, if a fence of any process recorded one and did not revoke */
    static Optional<Map<V1Fence.Key, Integer>> read(Path stateDir, CgroupDir.Id id, Path cgroup) {
        Path f = file(stateDir, id);
        if (!Files.exists(f, LinkOption.NOFOLLOW_LINKS)) {
            return Optional.empty();
        }
        checkPrivate(stateDir);
        try {
            if (!Files.isRegularFile(f, LinkOption.NOFOLLOW_LINKS)) {
                throw new IsolationException("the host-policy record " + f + " of cgroup " + cgroup
                        + " is not a regular file; refusing to fence");
            }
            List<String> lines = new ArrayList<>(Files.readAllLines(f, StandardCharsets.UTF_8));
            if (lines.isEmpty() || !lines.get(0).startsWith(HEADER)) {
                throw new IsolationException("the host-policy record " + f + " of cgroup " + cgroup
                        + " has no header line; remove it by hand after checking the cgroup's devices.list");
            }
            lines.remove(0);
            V1Fence.State s = V1Fence.parse(lines, f);
            if (s.defaultAllow()) {
                throw new IsolationException("the host-policy record " + f + " of cgroup " + cgroup
                        + " says default-allow, which v1 fences never record");
            }
            return Optional.of(Map.copyOf(s.exceptions()));
        } catch (IOException e) {
            throw new IsolationException("reading the host-policy record " + f + " of cgroup " + cgroup + " failed: "
                    + e.getMessage(), e);
        }
    }

    /** Writes the record durably (temp file, fsync, atomic rename) before any rule is written. */
    static void write(Path stateDir, CgroupDir.Id id, Path cgroup, Map<V1Fence.Key, Integer> host) {
        Path f = file(stateDir, id);
        try {
            if (!Files.isDirectory(stateDir)) {
                Files.createDirectories(stateDir,
                        PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
            }
            checkPrivate(stateDir);
            StringBuilder b = new StringBuilder(HEADER).append(cgroup).append('\n');
            host.forEach((k, bits) -> b.append(k.line(bits)).append('\n'));
            Path tmp = stateDir.resolve(f.getFileName() + ".tmp-" + ProcessHandle.current().pid());
            try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                    StandardOpenOption.TRUNCATE_EXISTING, LinkOption.NOFOLLOW_LINKS)) {
                ch.write(java.nio.ByteBuffer.wrap(b.toString().getBytes(StandardCharsets.UTF_8)));
                ch.force(true);
            }
            Files.move(tmp, f, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } catch (IOException e) {
            throw new IsolationException("recording the host's device list of " + cgroup + " in " + f
                    + " failed before any rule was written: " + e.getMessage(), e);
        }
    }

    /** Removes the record; @return false when it could not be removed */
    static boolean delete(Path stateDir, CgroupDir.Id id) {
        try {
            Files.deleteIfExists(file(stateDir, id));
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    private static void checkPrivate(Path stateDir) {
        try {
            Set<PosixFilePermission> p = Files.getPosixFilePermissions(stateDir, LinkOption.NOFOLLOW_LINKS);
            if (Files.isSymbolicLink(stateDir) || p.contains(PosixFilePermission.GROUP_WRITE)
                    || p.contains(PosixFilePermission.OTHERS_WRITE)) {
                throw new IsolationException("isolation state directory " + stateDir + " is a symlink or writable by"
                        + " others (" + PosixFilePermissions.toString(p) + "); whoever can write it chooses what"
                        + " revoke restores");
            }
        } catch (IOException e) {
            throw new IsolationException("checking isolation state directory " + stateDir + " failed: "
                    + e.getMessage(), e);
        }
    }
}
