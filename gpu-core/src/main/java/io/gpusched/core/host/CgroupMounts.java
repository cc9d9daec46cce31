package io.gpusched.core.host;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.Charset;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * The cgroup mounts {@code /proc/self/mountinfo} lists: the v1 devices hierarchy and the cgroup2 mount (the first of
 * each: where gpu-isolation makes job cgroups), and every cgroup mount with the directory mounted there, where
 * {@link AllocationAttribution} reads a process's cgroup paths (a hybrid host mounts cgroup2 at
 * {@code /sys/fs/cgroup/unified}: review54; a container mounts a subtree, or the host's hierarchy from its own cgroup
 * namespace: reviews 56, 57). The file is read as bytes: a mount point or root that is not valid in the file-name
 * encoding loses its line only, never the whole table (review56).
 *
 * @param v1Devices the first v1 hierarchy with the devices controller, if mounted
 * @param v2        the first cgroup2 mount point, if mounted
 * @param all       every cgroup mount, in the order listed (a later one at the same point hides the earlier)
 */
public record CgroupMounts(Optional<Path> v1Devices, Optional<Path> v2, List<Mount> all) {

    /**
     * One cgroup mount.
     *
     * @param point       where it is mounted
     * @param root        the cgroup directory mounted there, as the reader's cgroup namespace names it ({@code /}, a
     *                    subtree, or {@code /../..} for a hierarchy of another namespace)
     * @param v2          whether it is cgroup2
     * @param controllers a v1 mount's super options (its controllers, {@code name=...}); empty for cgroup2
     */
    public record Mount(Path point, String root, boolean v2, Set<String> controllers) {
        /** Copies the set. */
        public Mount {
            controllers = Set.copyOf(controllers);
        }
    }

    /** Copies the list. */
    public CgroupMounts {
        all = List.copyOf(all);
    }

    /**
     * @param mountinfo a {@code mountinfo} file
     * @return its cgroup mounts; none when it cannot be read
     */
    public static CgroupMounts read(Path mountinfo) {
        String text;
        try {
            text = new String(Files.readAllBytes(mountinfo), StandardCharsets.ISO_8859_1); // a byte per char
        } catch (IOException | RuntimeException e) {
            return new CgroupMounts(Optional.empty(), Optional.empty(), List.of());
        }
        Optional<Path> v1 = Optional.empty();
        Optional<Path> v2 = Optional.empty();
        List<Mount> all = new ArrayList<>();
        for (String line : text.split("\n")) {
            String[] f = line.split(" ");
            int dash = Arrays.asList(f).indexOf("-");
            if (dash < 0 || f.length < dash + 4 || f.length < 5) {
                continue;
            }
            String type = f[dash + 1];
            if (!type.equals("cgroup2") && !type.equals("cgroup")) {
                continue;
            }
            Optional<String> point = name(f[4]);
            Optional<String> root = name(f[3]);
            if (point.isEmpty() || root.isEmpty()) {
                continue;
            }
            Path at;
            try {
                at = Path.of(point.get());
            } catch (InvalidPathException e) {
                continue;
            }
            boolean isV2 = type.equals("cgroup2");
            Set<String> options = isV2 ? Set.of() : Set.of(f[dash + 3].split(","));
            all.add(new Mount(at, root.get(), isV2, options));
            if (isV2 && v2.isEmpty()) {
                v2 = Optional.of(at);
            } else if (!isV2 && v1.isEmpty() && options.contains("devices")) {
                v1 = Optional.of(at);
            }
        }
        return new CgroupMounts(v1, v2, all);
    }

    /**
     * @return how this JVM decodes file names ({@code sun.jnu.encoding}): the kernel's path bytes in
     *         {@code mountinfo} and {@code /proc/<pid>/cgroup} read as the paths Java names (review56: a job cgroup
     *         named in UTF-8 never matched a cgroup file read as Latin-1)
     */
    public static Charset fileNames() {
        try {
            return Charset.forName(System.getProperty("sun.jnu.encoding", "UTF-8"));
        } catch (RuntimeException e) {
            return Charset.defaultCharset();
        }
    }

    /**
     * @return a mountinfo field (chars standing for bytes) unescaped and decoded as a file name; empty when its bytes
     *         are not valid in the file-name encoding (review57: replaced characters named a path that does not exist)
     */
    private static Optional<String> name(String field) {
        try {
            return Optional.of(fileNames().newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(unescape(field).getBytes(StandardCharsets.ISO_8859_1))).toString());
        } catch (CharacterCodingException e) {
            return Optional.empty();
        }
    }

    /**
     * @param s a path as mountinfo writes it
     * @return the path: mountinfo escapes space, tab, newline and backslash as octal
     */
    public static String unescape(String s) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '\\' && i + 3 < s.length() && s.substring(i + 1, i + 4).matches("[0-7]{3}")) {
                b.append((char) Integer.parseInt(s.substring(i + 1, i + 4), 8));
                i += 3;
            } else {
                b.append(c);
            }
        }
        return b.toString();
    }
}
