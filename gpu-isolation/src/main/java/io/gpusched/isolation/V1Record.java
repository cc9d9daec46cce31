package io.gpusched.isolation;

import java.io.IOException;
import java.nio.ByteBuffer;
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
 * What a v1 fence must know about a cgroup across processes, recorded on disk (one file per cgroup identity, in the
 * node's isolation state directory) before a fence writes its first rule:
 * <ul>
 *   <li>default-deny cgroup: the host's exception list when first fenced ({@link Kind#HOST_LIST}), removed once
 *   revoke has given it back. A later fence from any process (the first fencer died) restores the host's list, not
 *   the dead fence's;</li>
 *   <li>default-allow cgroup: the deny bits fences added ({@link Kind#OUR_DENIES}), rewritten before every change to
 *   cover both the bits in force and those about to be written, removed once revoke has lifted them. A later fence
 *   from any process lifts exactly those (where the kernel still has them) and takes every other deny for the
 *   host's.</li>
 * </ul>
 * Each record is written to a temp file, fsync'd, renamed over the old one and the directory fsync'd. The directory
 * must be root's alone: whoever can write a record chooses what revoke restores.
 */
final class V1Record {
    private static final String HOST_HEADER = "# gpusched v1 host device list of cgroup ";
    private static final String DENY_HEADER = "# gpusched v1 denies added by fences to default-allow cgroup ";

    /** What a record holds. */
    enum Kind {
        /** the host's exception list of a default-deny cgroup */
        HOST_LIST,
        /** the deny bits fences added to a default-allow cgroup */
        OUR_DENIES
    }

    /** A record read back. */
    record Entry(Kind kind, Map<V1Fence.Key, Integer> rules) {
    }

    private V1Record() {
    }

    static Path file(Path stateDir, CgroupDir.Id id) {
        return stateDir.resolve("v1-" + id.dev() + "-" + id.ino());
    }

    /** @return the record of this cgroup, if a fence of any process wrote one and did not revoke */
    static Optional<Entry> read(Path stateDir, CgroupDir.Id id, Path cgroup) {
        Path f = file(stateDir, id);
        if (!Files.exists(f, LinkOption.NOFOLLOW_LINKS)) {
            return Optional.empty();
        }
        checkPrivate(stateDir);
        try {
            if (!Files.isRegularFile(f, LinkOption.NOFOLLOW_LINKS)) {
                throw new IsolationException("the isolation record " + f + " of cgroup " + cgroup
                        + " is not a regular file; refusing to fence");
            }
            List<String> lines = new ArrayList<>(Files.readAllLines(f, StandardCharsets.UTF_8));
            Kind kind = lines.isEmpty() ? null : lines.get(0).startsWith(HOST_HEADER) ? Kind.HOST_LIST
                    : lines.get(0).startsWith(DENY_HEADER) ? Kind.OUR_DENIES : null;
            if (kind == null) {
                throw new IsolationException("the isolation record " + f + " of cgroup " + cgroup
                        + " has no header line; remove it by hand after checking the cgroup's devices.list");
            }
            lines.remove(0);
            V1Fence.State s = V1Fence.parse(lines, f);
            if (s.defaultAllow()) {
                throw new IsolationException("the isolation record " + f + " of cgroup " + cgroup
                        + " holds 'a *:* rwm', which v1 fences never record");
            }
            return Optional.of(new Entry(kind, Map.copyOf(s.exceptions())));
        } catch (IOException e) {
            throw new IsolationException("reading the isolation record " + f + " of cgroup " + cgroup + " failed: "
                    + e.getMessage(), e);
        }
    }

    /** Writes the record durably (temp file, fsync, atomic rename, directory fsync) before any rule is written. */
    static void write(Path stateDir, CgroupDir.Id id, Path cgroup, Kind kind, Map<V1Fence.Key, Integer> rules) {
        Path f = file(stateDir, id);
        try {
            ensureStateDir(stateDir);
            StringBuilder b = new StringBuilder(kind == Kind.HOST_LIST ? HOST_HEADER : DENY_HEADER).append(cgroup)
                    .append('\n');
            rules.forEach((k, bits) -> b.append(k.line(bits)).append('\n'));
            Path tmp = stateDir.resolve(f.getFileName() + ".tmp-" + ProcessHandle.current().pid() + "-"
                    + Thread.currentThread().getId());
            try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                    StandardOpenOption.TRUNCATE_EXISTING, LinkOption.NOFOLLOW_LINKS)) {
                ch.write(ByteBuffer.wrap(b.toString().getBytes(StandardCharsets.UTF_8)));
                ch.force(true);
            }
            Files.move(tmp, f, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            syncDirectory(stateDir);
        } catch (IOException e) {
            throw new IsolationException("recording " + (kind == Kind.HOST_LIST ? "the host's device list"
                    : "the denies the fence adds") + " of " + cgroup + " in " + f + " failed before any rule was"
                    + " written: " + e.getMessage(), e);
        }
    }

    /** Removes the record; @return false when it could not be removed */
    static boolean delete(Path stateDir, CgroupDir.Id id) {
        try {
            if (Files.deleteIfExists(file(stateDir, id))) {
                syncDirectory(stateDir);
            }
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    /** Makes the state directory (rwx------) when missing; refuses one others can write. */
    static void ensureStateDir(Path stateDir) throws IOException {
        if (!Files.isDirectory(stateDir)) {
            Files.createDirectories(stateDir,
                    PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        }
        checkPrivate(stateDir);
    }

    private static void syncDirectory(Path dir) throws IOException {
        try (FileChannel ch = FileChannel.open(dir, StandardOpenOption.READ)) {
            ch.force(true);
        }
    }

    static void checkPrivate(Path stateDir) {
        try {
            Set<PosixFilePermission> p = Files.getPosixFilePermissions(stateDir, LinkOption.NOFOLLOW_LINKS);
            if (Files.isSymbolicLink(stateDir) || p.contains(PosixFilePermission.GROUP_WRITE)
                    || p.contains(PosixFilePermission.OTHERS_WRITE)) {
                throw new IsolationException("isolation state directory " + stateDir + " is a symlink or writable by"
                        + " others (" + PosixFilePermissions.toString(p) + "); whoever can write it chooses what"
                        + " revoke restores");
            }
            Object owner = Files.getAttribute(stateDir, "unix:uid", LinkOption.NOFOLLOW_LINKS);
            Object me = Files.getAttribute(Path.of("/proc/self"), "unix:uid");
            if (!owner.equals(me)) {
                throw new IsolationException("isolation state directory " + stateDir + " is owned by uid " + owner
                        + ", not by this process's user (uid " + me + "); whoever owns it can write a record and so"
                        + " choose what revoke restores: give it to uid " + me + " (chown) or use another directory");
            }
        } catch (UnsupportedOperationException | IllegalArgumentException e) {
            throw new IsolationException("checking the owner of isolation state directory " + stateDir + " failed: "
                    + e.getMessage(), e);
        } catch (IOException e) {
            throw new IsolationException("checking isolation state directory " + stateDir + " failed: "
                    + e.getMessage(), e);
        }
    }
}
