package io.gpusched.testing;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

/**
 * Real Unix users and groups for a test, made with {@code useradd}/{@code groupadd} (the test runs as root) under
 * unique names ({@code gsu-<base>-<random>}, at most 32 characters) so that tests of several builds on one machine
 * never collide, and removed ({@code userdel -r}, {@code groupdel}) on {@link #close()}, also when the test failed.
 */
public final class TestUsers implements AutoCloseable {

    /** A user made for the test. */
    public record User(String name, long uid, long gid) {
    }

    private final List<String> users = new ArrayList<>();
    private final List<String> groups = new ArrayList<>();

    /** @return why users cannot be made here (not root, no useradd), or null when they can */
    public static String unavailable() {
        if (!"root".equals(System.getProperty("user.name"))) {
            return "making users needs root (running as " + System.getProperty("user.name") + ")";
        }
        for (String tool : List.of("/usr/sbin/useradd", "/usr/sbin/userdel", "/usr/sbin/groupadd",
                "/usr/sbin/groupdel")) {
            if (!Files.isExecutable(Path.of(tool))) {
                return tool + " is missing (package passwd)";
            }
        }
        return null;
    }

    private static String unique(String base) {
        String b = base.length() > 16 ? base.substring(0, 16) : base;
        return "gsu-" + b + "-" + UUID.randomUUID().toString().substring(0, 6);
    }

    /**
     * Makes a group.
     *
     * @return its (unique) name
     */
    public String group(String base) throws Exception {
        String name = unique(base);
        run("/usr/sbin/groupadd", name);
        groups.add(name);
        return name;
    }

    /**
     * Makes a user with a home directory and these supplementary groups.
     *
     * @return the user with its uid and primary gid
     */
    public User user(String base, String... supplementary) throws Exception {
        String name = unique(base);
        List<String> cmd = new ArrayList<>(List.of("/usr/sbin/useradd", "-m", "-s", "/bin/sh", "-U"));
        if (supplementary.length > 0) {
            cmd.add("-G");
            cmd.add(String.join(",", supplementary));
        }
        cmd.add(name);
        run(cmd.toArray(String[]::new));
        users.add(name);
        long uid = Long.parseLong(run("/usr/bin/id", "-u", name).strip());
        long gid = Long.parseLong(run("/usr/bin/id", "-g", name).strip());
        return new User(name, uid, gid);
    }

    /** @return the command's output @throws IOException when it fails, with its output */
    public static String run(String... cmd) throws IOException, InterruptedException {
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
        pb.environment().clear();
        pb.environment().put("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(60, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new IOException(String.join(" ", cmd) + " took over 60 s");
        }
        if (p.exitValue() != 0) {
            throw new IOException(String.join(" ", cmd) + " failed (exit " + p.exitValue() + "): " + out.strip());
        }
        return out;
    }

    /**
     * Runs a command as a user ({@code setpriv} with the user's uid, gid and groups, and a clean environment).
     *
     * @return the finished process (its output merged into stdout)
     */
    public static Process as(User u, List<String> cmd) throws IOException {
        List<String> all = new ArrayList<>(List.of("/usr/bin/setpriv", "--reuid=" + u.uid(), "--regid=" + u.gid(),
                "--init-groups", "--"));
        all.addAll(cmd);
        ProcessBuilder pb = new ProcessBuilder(all).redirectErrorStream(true);
        pb.environment().clear();
        pb.environment().put("PATH", "/usr/bin:/bin");
        pb.environment().put("HOME", "/home/" + u.name());
        pb.directory(Path.of("/").toFile());
        return pb.start();
    }

    /** Removes the users (with their homes) and groups made, the users first; failures are printed, not thrown. */
    @Override
    public void close() {
        for (String u : users) {
            try {
                run("/usr/sbin/userdel", "-r", "-f", u);
            } catch (Exception e) {
                System.err.println("TestUsers: could not remove user " + u + ": " + e.getMessage());
            }
        }
        users.clear();
        for (String g : groups) {
            try {
                run("/usr/sbin/groupdel", g);
            } catch (Exception e) {
                System.err.println("TestUsers: could not remove group " + g + ": " + e.getMessage());
            }
        }
        groups.clear();
    }
}
