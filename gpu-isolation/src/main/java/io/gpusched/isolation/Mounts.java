package io.gpusched.isolation;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Optional;

/** Finds the cgroup v1 devices hierarchy and the cgroup2 mount in {@code /proc/self/mountinfo}. */
record Mounts(Optional<Path> v1Devices, Optional<Path> v2) {

    static Mounts read(Path mountinfo) {
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
            return new Mounts(Optional.empty(), Optional.empty());
        }
        return new Mounts(v1, v2);
    }

    /** mountinfo escapes space, tab, newline and backslash as octal. */
    static String unescape(String s) {
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
