package io.gpusched.core;

import java.util.Collection;
import java.util.Collections;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;

/**
 * How many GPUs one user may hold at once ({@code gpu.users}): {@code max_gpus} for everyone (0: no limit), overridden
 * per user ({@code per_user: {alice: 8}}) and per group ({@code per_group: {students: 2}}). A user's limit is their
 * per-user override, else the largest override of their groups, else {@code max_gpus}. The scheduler enforces it in
 * the ledger's transaction, counting the GPUs of every live allocation the user owns (matched by uid where both
 * sides have one, else by owner name), and refuses with {@link GpuAllocationException.Reason#QUOTA_EXCEEDED}.
 * Requests without an owner are not limited.
 *
 * @param maxGpus  GPUs any one user may hold; 0: no limit
 * @param perUser  per-user limits by user name (0: no limit for that user)
 * @param perGroup per-group limits by group name (0: no limit for members of that group)
 */
public record UserQuotas(int maxGpus, Map<String, Integer> perUser, Map<String, Integer> perGroup) {

    /** The longest user or group name accepted. */
    public static final int MAX_NAME = 256;

    /** @throws GpuConfigException naming a negative limit or a name that cannot be a user or group name */
    public UserQuotas {
        if (maxGpus < 0) {
            throw new GpuConfigException("gpu.users.max_gpus: must be >= 0 (0 = no limit), was " + maxGpus);
        }
        perUser = checked(perUser, "gpu.users.per_user");
        perGroup = checked(perGroup, "gpu.users.per_group");
    }

    private static Map<String, Integer> checked(Map<String, Integer> m, String where) {
        Objects.requireNonNull(m, where);
        TreeMap<String, Integer> out = new TreeMap<>();
        for (Map.Entry<String, Integer> e : m.entrySet()) {
            String name = e.getKey();
            if (!validName(name)) {
                throw new GpuConfigException(where + ": \"" + printable(name) + "\" is not a user or group name (1 to "
                        + MAX_NAME + " printable characters, no whitespace, ':' or '/')");
            }
            if (e.getValue() == null || e.getValue() < 0) {
                throw new GpuConfigException(where + "." + name + ": must be >= 0 (0 = no limit), was " + e.getValue());
            }
            out.put(name, e.getValue());
        }
        return Collections.unmodifiableMap(out);
    }

    /**
     * @return whether {@code s} can be a user or group name here: printable (non-ASCII letters too, as NSS may give
     *         them: "josé"), no blank, no control or line separator, no ':' or '/', at most {@link #MAX_NAME}
     *         characters; the node service's callers are named by the same rule, so every caller it serves has its
     *         groups and limits looked up (review32: a name outside ASCII escaped its group's quota)
     */
    public static boolean validName(String s) {
        return s != null && !s.isEmpty() && s.length() <= MAX_NAME && s.codePoints().allMatch(c -> c > 0x20
                && c != 0x7f && !Character.isISOControl(c) && !Character.isWhitespace(c) && !Character.isSpaceChar(c)
                && c != 0x2028 && c != 0x2029 && c != ':' && c != '/');
    }

    /**
     * @param s a name
     * @return whether it reads as a uid ({@code 1001}, {@code +1001}, {@code 01001}): tools such as {@code id} take it
     *         for one, so a node service never uses it as a user's name (a caller whose name is one is named by its
     *         own uid instead, and an owner named by one is no user: reviews 31, 37)
     */
    public static boolean looksLikeUid(String s) {
        return s != null && s.matches("\\+?[0-9]+");
    }

    private static String printable(String s) {
        return s == null ? "null" : s.replaceAll("[^\\x20-\\x7e]", "?");
    }

    /** @return no limits */
    public static UserQuotas none() {
        return new UserQuotas(0, Map.of(), Map.of());
    }

    /** @return whether any limit is set */
    public boolean any() {
        return maxGpus > 0 || perUser.values().stream().anyMatch(v -> v > 0)
                || perGroup.values().stream().anyMatch(v -> v > 0);
    }

    /**
     * One user's limit and where it comes from.
     *
     * @param gpus   GPUs the user may hold; 0: no limit
     * @param source the setting it comes from, e.g. {@code gpu.users.per_group.students}
     */
    public record Limit(int gpus, String source) {
        /** Checks the values. */
        public Limit {
            Objects.requireNonNull(source, "source");
            if (gpus < 0) {
                throw new IllegalArgumentException("a limit must be >= 0, was " + gpus);
            }
        }

        /** @return whether this limits anything */
        public boolean limited() {
            return gpus > 0;
        }
    }

    /**
     * @param user   the user's name
     * @param groups the names of the user's groups (primary and supplementary)
     * @return the user's limit: the per-user override, else the largest of their groups', else {@code max_gpus}
     */
    public Limit limitFor(String user, Collection<String> groups) {
        Integer own = perUser.get(user);
        if (own != null) {
            return new Limit(own, "gpu.users.per_user." + user);
        }
        String best = null;
        int bestGpus = -1;
        for (String g : groups) {
            Integer v = perGroup.get(g);
            // 0 means no limit, the most generous a group can give
            if (v != null && (bestGpus != 0 && (v == 0 || v > bestGpus))) {
                best = g;
                bestGpus = v;
            }
        }
        if (best != null) {
            return new Limit(bestGpus, "gpu.users.per_group." + best + " (" + user + " is a member of " + best + ")");
        }
        return new Limit(maxGpus, "gpu.users.max_gpus");
    }
}
