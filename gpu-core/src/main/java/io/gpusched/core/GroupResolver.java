package io.gpusched.core;

import java.util.List;

/**
 * The groups of a user, for per-group quotas ({@code gpu.users.per_group}). The scheduler asks it outside the
 * ledger's lock, once per allocation request that has an owner, only while a per-group limit is configured. The node
 * service answers with the groups the kernel and NSS gave its caller; a host with no way to know answers nothing.
 */
@FunctionalInterface
public interface GroupResolver {

    /**
     * @param user the owner's name as the request carries it
     * @return the names of the user's groups, primary and supplementary; empty when unknown
     */
    List<String> groupsOf(String user);

    /** @return a resolver that knows no groups (only per-user limits and {@code max_gpus} apply) */
    static GroupResolver none() {
        return user -> List.of();
    }
}
