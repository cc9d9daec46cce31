package io.gpusched.core.host;

import java.io.IOException;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Optional;

/**
 * The cgroup v1 devices hierarchy and the cgroup2 mount, as {@code /proc/self/mountinfo} lists them (the first of
 * each): where gpu-isolation makes job cgroups, and where {@link AllocationAttribution} finds a process's cgroup2 path
 * (a hybrid host mounts cgroup2 at {@code /sys/fs/cgroup/unified}, not at the cgroup root: review54). The file is read
 * as bytes: a mount point is a file name, any bytes but the four the kernel escapes, so one that is not valid in the
 * file-name encoding loses that line only, never the whole table (review56).
 *
 * @param v1Devices the v1 hierarchy with the devices controller, if mounted
 * @param v2        the cgroup2 mount point, if mounted
 * @param v2Root    the cgroup2 directory mounted there ({@code /}, or a subtree, as in a container that shares the
 *                  host's cgroup namespace: a process's cgroup2 path is below it)
 */
public record CgroupMounts(Optional<Path> v1Devices, Optional<Path> v2, String v2Root) {

    /**
     * @param mountinfo a {@code mountinfo} file
     * @return its cgroup mounts; none when it cannot be read
     */
    public static CgroupMounts read(Path mountinfo) {
        Optional<Path> v1 = Optional.empty();
        Optional<Path> v2 = Optional.empty();
        String v2Root = "/";
        String text;
        try {
            text = new String(Files.readAllBytes(mountinfo), StandardCharsets.ISO_8859_1); // a byte per char
        } catch (IOException | RuntimeException e) {
            return new CgroupMounts(Optional.empty(), Optional.empty(), "/");
        }
        for (String line : text.split("\n")) {
            String[] f = line.split(" ");
            int dash = Arrays.asList(f).indexOf("-");
            if (dash < 0 || f.length < dash + 4 || f.length < 5) {
                continue;
            }
            String type = f[dash + 1];
            String superOptions = f[dash + 3];
            boolean isV2 = type.equals("cgroup2") && v2.isEmpty();
            boolean isV1 = type.equals("cgroup") && v1.isEmpty()
                    && Arrays.asList(superOptions.split(",")).contains("devices");
            if (!isV2 && !isV1) {
                continue;
            }
            Path point;
            try {
                point = Path.of(name(f[4]));
            } catch (InvalidPathException e) {
                continue;
            }
            if (isV2) {
                v2 = Optional.of(point);
                v2Root = name(f[3]);
            } else {
                v1 = Optional.of(point);
            }
        }
        return new CgroupMounts(v1, v2, v2Root);
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

    /** @return a mountinfo field (chars standing for bytes) unescaped and decoded as a file name */
    private static String name(String field) {
        return new String(unescape(field).getBytes(StandardCharsets.ISO_8859_1), fileNames());
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
