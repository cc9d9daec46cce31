package io.gpusched.isolation;

import java.nio.file.Path;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * What a job runs and as whom: the command, its environment (the user's, already dressed with the allocation's CUDA
 * environment), the working directory (entered after the switch to the user, so only one the user may enter works),
 * the uid and gid the kernel vouched for, and where its output goes. Checked when built: every refusal names the field
 * and what is valid.
 *
 * @param argv   the command and its arguments (at least the command; no NUL)
 * @param env    the job's environment: names of letters, digits and {@code _} not starting with a digit, values
 *               without NUL
 * @param cwd    the working directory: absolute, no NUL
 * @param uid    the user's uid
 * @param gid    the user's primary gid
 * @param user   the user's name (for {@code setpriv --init-groups} and messages)
 * @param output where stdout and stderr go: empty for pipes the caller reads, else a file the caller made for the
 *               user (both streams appended to it)
 */
public record JobSpec(List<String> argv, Map<String, String> env, Path cwd, long uid, long gid, String user,
        Optional<Path> output) {

    /** Most arguments and their bytes, environment entries and their bytes. */
    public static final int MAX_ARGS = 4096;
    /** Most bytes in all arguments together. */
    public static final int MAX_ARG_BYTES = 256 * 1024;
    /** Most environment entries. */
    public static final int MAX_ENV = 4096;
    /** Most bytes in the environment together. */
    public static final int MAX_ENV_BYTES = 256 * 1024;

    private static final Pattern NAME = Pattern.compile("[A-Za-z_][A-Za-z0-9_]{0,255}");
    private static final Pattern USER = Pattern.compile("[A-Za-z0-9_.][A-Za-z0-9_.-]{0,255}\\$?");

    /** @throws IllegalArgumentException naming the field that is not valid and what would be */
    public JobSpec {
        Objects.requireNonNull(argv, "argv");
        Objects.requireNonNull(env, "env");
        Objects.requireNonNull(cwd, "cwd");
        Objects.requireNonNull(user, "user");
        Objects.requireNonNull(output, "output");
        argv = List.copyOf(argv);
        if (argv.isEmpty() || argv.get(0).isEmpty()) {
            throw new IllegalArgumentException("argv: give the command to run (a non-empty first argument)");
        }
        if (argv.size() > MAX_ARGS) {
            throw new IllegalArgumentException("argv: " + argv.size() + " arguments; at most " + MAX_ARGS);
        }
        long bytes = 0;
        for (int i = 0; i < argv.size(); i++) {
            String a = argv.get(i);
            if (a.indexOf('\0') >= 0) {
                throw new IllegalArgumentException("argv[" + i + "] contains a NUL character, which no argument can");
            }
            bytes += a.length() + 1;
        }
        if (bytes > MAX_ARG_BYTES) {
            throw new IllegalArgumentException("argv: " + bytes + " bytes in all; at most " + MAX_ARG_BYTES);
        }
        if (env.size() > MAX_ENV) {
            throw new IllegalArgumentException("env: " + env.size() + " variables; at most " + MAX_ENV);
        }
        bytes = 0;
        Map<String, String> copy = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : env.entrySet()) {
            String k = e.getKey();
            String v = e.getValue();
            if (k == null || !NAME.matcher(k).matches()) {
                throw new IllegalArgumentException("env: \"" + printable(k) + "\" is not a variable name (letters,"
                        + " digits and _, not starting with a digit, at most 256 characters)");
            }
            if (v == null || v.indexOf('\0') >= 0) {
                throw new IllegalArgumentException("env." + k + ": the value must be a string without NUL");
            }
            bytes += k.length() + v.length() + 2;
            copy.put(k, v);
        }
        if (bytes > MAX_ENV_BYTES) {
            throw new IllegalArgumentException("env: " + bytes + " bytes in all; at most " + MAX_ENV_BYTES);
        }
        env = Collections.unmodifiableMap(copy);
        String c = cwd.toString();
        if (!cwd.isAbsolute() || c.indexOf('\0') >= 0 || c.length() > 4096) {
            throw new IllegalArgumentException("cwd: \"" + printable(c) + "\" is not an absolute path (at most 4096"
                    + " characters)");
        }
        if (uid < 0 || uid > 0xFFFF_FFFEL || gid < 0 || gid > 0xFFFF_FFFEL) {
            throw new IllegalArgumentException("uid and gid must be 0 to 4294967294, were " + uid + " and " + gid);
        }
        if (!USER.matcher(user).matches()) {
            throw new IllegalArgumentException("user: \"" + printable(user) + "\" is not a user name the system"
                    + " can switch to");
        }
    }

    static String printable(String s) {
        if (s == null) {
            return "null";
        }
        String t = s.length() > 200 ? s.substring(0, 200) + "..." : s;
        return t.replaceAll("[^\\x20-\\x7e]", "?");
    }
}
