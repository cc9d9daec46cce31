package io.gpusched.testing;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Real local users and groups for tests that act as several users (as root): each made with {@code useradd} /
 * {@code groupadd} under a unique name ({@code gsu-<label>-<random>}, so tests of other runs on the same machine never
 * collide), and removed by {@link #close()} even when the test failed. Commands run as a user through
 * {@code setpriv --reuid --regid --init-groups}, so they carry that user's uid, gid and supplementary groups.
 */
public final class LocalUsers implements AutoCloseable {
    private final List<String> users = new ArrayList<>();
    private final List<String> groups = new ArrayList<>();
    private final String suffix;

    /** A user made for a test. */
    public record User(String name, long uid, long gid) {
    }

    /** The output of a command run as a user. */
    public record Result(int exit, String out, String err) {
    }

    /** @return a new set of users (nothing is made yet) */
    public static LocalUsers create() {
        return new LocalUsers();
    }

    private LocalUsers() {
        byte[] r = new byte[3];
        new SecureRandom().nextBytes(r);
        suffix = HexFormat.of().formatHex(r);
    }

    /** @return whether this process is root and has useradd, so real users can be made */
    public static boolean available() {
        try {
            return run(List.of("id", "-u"), 10).out().strip().equals("0")
                    && run(List.of("sh", "-c", "command -v useradd && command -v setpriv"), 10).exit() == 0;
        } catch (IOException e) {
            return false;
        }
    }

    /**
     * Makes a group.
     *
     * @param label a short word (the group is {@code gsg-<label>-<random>})
     * @return its name
     */
    public String group(String label) throws IOException {
        String name = "gsg-" + label + "-" + suffix;
        check(run(List.of("groupadd", name), 60), "groupadd " + name);
        groups.add(name);
        return name;
    }

    /**
     * Makes a user with no home directory and a group of its own.
     *
     * @param label        a short word (the user is {@code gsu-<label>-<random>}, at most 32 characters)
     * @param supplementary groups the user is a member of
     * @return the user
     */
    public User user(String label, String... supplementary) throws IOException {
        String name = "gsu-" + label + "-" + suffix;
        List<String> cmd = new ArrayList<>(List.of("useradd", "-M", "-U", "-s", "/bin/sh"));
        if (supplementary.length > 0) {
            cmd.add("-G");
            cmd.add(String.join(",", supplementary));
        }
        cmd.add(name);
        check(run(cmd, 60), "useradd " + name);
        users.add(name);
        long uid = Long.parseLong(run(List.of("id", "-u", name), 10).out().strip());
        long gid = Long.parseLong(run(List.of("id", "-g", name), 10).out().strip());
        return new User(name, uid, gid);
    }

    /**
     * Runs a command as {@code user} (uid, gid and supplementary groups switched by setpriv), with a plain
     * environment. setpriv looks a {@code --reuid} up as a user name first and as a number only then, so a user is
     * given by name unless the name is a number (review37: with a user named "1002" on the host, {@code --reuid=1002}
     * ran as that user, not as uid 1002).
     */
    public static Result runAs(User user, List<String> command, int timeoutSeconds) throws IOException {
        String reuid = user.name().matches("\\+?[0-9]+") ? Long.toString(user.uid()) : user.name();
        List<String> cmd = new ArrayList<>(List.of("setpriv", "--reuid=" + reuid, "--regid=" + user.gid(),
                "--init-groups", "--"));
        cmd.addAll(command);
        return run(cmd, timeoutSeconds);
    }

    /** Runs a command as this process's user, with a plain environment; its output as text. */
    public static Result run(List<String> command, int timeoutSeconds) throws IOException {
        ProcessBuilder pb = new ProcessBuilder(command);
        pb.environment().clear();
        pb.environment().put("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
        pb.environment().put("LC_ALL", "C");
        Process p = pb.start();
        p.getOutputStream().close();
        try {
            // drain both pipes concurrently so a chatty command cannot block on a full one
            var err = p.getErrorStream();
            StringBuilder errText = new StringBuilder();
            Thread t = new Thread(() -> {
                try {
                    errText.append(new String(err.readAllBytes(), StandardCharsets.UTF_8));
                } catch (IOException ignored) {
                    // the process went away
                }
            });
            t.start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!p.waitFor(timeoutSeconds, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new IOException(command + " did not finish within " + timeoutSeconds + " s");
            }
            t.join(10_000);
            return new Result(p.exitValue(), out, errText.toString());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            p.destroyForcibly();
            throw new IOException("interrupted", e);
        }
    }

    private static void check(Result r, String what) throws IOException {
        if (r.exit() != 0) {
            throw new IOException(what + " failed (" + r.exit() + "): " + r.err());
        }
    }

    /** Removes every user and group made here; never throws. */
    @Override
    public void close() {
        for (String u : users) {
            try {
                run(List.of("userdel", "-f", u), 60);
            } catch (IOException ignored) {
                // left for the machine's owner; the name says what made it
            }
        }
        for (String g : groups) {
            try {
                run(List.of("groupdel", g), 60);
            } catch (IOException ignored) {
                // as above
            }
        }
        users.clear();
        groups.clear();
    }
}
