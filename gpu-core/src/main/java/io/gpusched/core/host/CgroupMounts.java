package io.gpusched.core.host;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Optional;

/**
 * The cgroup v1 devices hierarchy and the cgroup2 mount, as {@code /proc/self/mountinfo} lists them (the first of
 * each): where gpu-isolation makes job cgroups, and where {@link AllocationAttribution} finds a process's cgroup2 path
 * (a hybrid host mounts cgroup2 at {@code /sys/fs/cgroup/unified}, not at the cgroup root: review54).
 *
 * @param v1Devices the v1 hierarchy with the devices controller, if mounted
 * @param v2        the cgroup2 mount, if mounted
 */
public record CgroupMounts(Optional<Path> v1Devices, Optional<Path> v2) {

    /**
     * @param mountinfo a {@code mountinfo} file
     * @return its cgroup mounts; none when it cannot be read
     */
    public static CgroupMounts read(Path mountinfo) {
        Optional<Path> v1 = Optional.empty();
        Optional<Path> v2 = Optional.empty();
        try {
            for (String line : Files.readAllLines(mountinfo)) {
                String[] f = line.split(" ");
                int dash = Arrays.asList(f).indexOf("-");
                if (dash < 0 || f.length < dash + 4 || f.length < 5) {
                    continue;
                }
                Path point = Path.of(unescape(f[4]));
                String type = f[dash + 1];
                String superOptions = f[dash + 3];
                if (type.equals("cgroup2") && v2.isEmpty()) {
                    v2 = Optional.of(point);
                } else if (type.equals("cgroup") && v1.isEmpty()
                        && Arrays.asList(superOptions.split(",")).contains("devices")) {
                    v1 = Optional.of(point);
                }
            }
        } catch (IOException e) {
            return new CgroupMounts(Optional.empty(), Optional.empty());
        }
        return new CgroupMounts(v1, v2);
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
