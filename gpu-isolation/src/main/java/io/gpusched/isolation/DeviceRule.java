package io.gpusched.isolation;

/**
 * One device-access rule: allow or deny access of a type to a major:minor (wildcards allowed), as cgroup v1 writes
 * it ({@code c 195:1 rw}) and as one block of the cgroup v2 device program.
 *
 * @param allow  allow (true) or deny
 * @param type   {@code 'c'} char, {@code 'b'} block, {@code 'a'} all
 * @param major  major number, {@link #ANY} for {@code *}
 * @param minor  minor number, {@link #ANY} for {@code *}
 * @param access subset of {@code "rwm"}
 */
public record DeviceRule(boolean allow, char type, int major, int minor, String access) {

    /** Wildcard major or minor. */
    public static final int ANY = -1;

    /** @throws IllegalArgumentException for an unknown type, a negative number or bad access letters */
    public DeviceRule {
        if (type != 'c' && type != 'b' && type != 'a') {
            throw new IllegalArgumentException("device type must be c, b or a, was '" + type + "'");
        }
        if (major < ANY || minor < ANY || major > 0xFFF || minor > 0xFFFFF) {
            throw new IllegalArgumentException("device number out of range: " + major + ":" + minor);
        }
        if (access.isEmpty() || !access.matches("r?w?m?")) {
            throw new IllegalArgumentException("access must be a non-empty subset of rwm in that order, was \""
                    + access + "\"");
        }
    }

    /** @return an allow rule for a char device */
    public static DeviceRule allowChar(int major, int minor, String access) {
        return new DeviceRule(true, 'c', major, minor, access);
    }

    /** @return a deny rule for a char device */
    public static DeviceRule denyChar(int major, int minor, String access) {
        return new DeviceRule(false, 'c', major, minor, access);
    }

    /** @return the cgroup v1 form, e.g. {@code c 195:1 rw} or {@code a *:* rwm} */
    public String v1Line() {
        return type + " " + (major == ANY ? "*" : String.valueOf(major)) + ":"
                + (minor == ANY ? "*" : String.valueOf(minor)) + " " + access;
    }

    /** @return the access bits of the v2 device program: mknod 1, read 2, write 4 */
    int accessBits() {
        return (access.contains("m") ? 1 : 0) | (access.contains("r") ? 2 : 0) | (access.contains("w") ? 4 : 0);
    }

    @Override
    public String toString() {
        return (allow ? "allow " : "deny ") + v1Line();
    }
}
