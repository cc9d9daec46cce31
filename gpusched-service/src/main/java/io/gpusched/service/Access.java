package io.gpusched.service;

import io.gpusched.core.AccessDeniedException;
import io.gpusched.core.Allocation;
import io.gpusched.server.Caller;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * Who may do what: an owner acts on its own allocations and jobs (matched by the uid the kernel gave when they were
 * made, never by name); root and members of {@code gpu.service.admin_group} act on any, and alone drain and undrain.
 * Allocations made outside the service (no owner uid) are acted on by admins only. Every refusal names who holds the
 * thing and who may act on it.
 */
final class Access {
    private final Optional<String> adminGroup;

    Access(Optional<String> adminGroup) {
        this.adminGroup = adminGroup;
    }

    /** @return who may act on a thing {@code owner} holds: the owner, root, the admin group */
    List<String> mayAct(Optional<String> owner) {
        List<String> out = new ArrayList<>();
        owner.ifPresent(out::add);
        out.add("root");
        adminGroup.ifPresent(g -> out.add("group " + g));
        return out;
    }

    private String admins() {
        return "root" + adminGroup.map(g -> " or a member of group " + g).orElse("");
    }

    /** @throws AccessDeniedException unless the caller owns the allocation (by uid) or is an admin */
    void check(Caller c, String action, Allocation a) {
        if (c.admin()) {
            return;
        }
        boolean owns = c.identified() && a.request().ownerUid().isPresent()
                && a.request().ownerUid().getAsLong() == c.uid();
        if (owns) {
            return;
        }
        String holder = a.owner().orElse("an unnamed owner") + a.request().ownerUid().stream()
                .mapToObj(u -> " (uid " + u + ")").findFirst().orElse(" (made outside the node service)");
        List<String> may = a.request().ownerUid().isPresent() ? mayAct(a.owner()) : mayAct(Optional.empty());
        throw new AccessDeniedException(action, a.id(), a.owner(), may, c.user() + " (uid " + c.uid()
                + ") may not " + action + " allocation " + a.id() + ": it is held by " + holder + "; "
                + (a.request().ownerUid().isPresent() ? "its owner, " : "") + admins() + " may");
    }

    /** @throws AccessDeniedException unless the caller owns the job (by uid) or is an admin */
    void checkJob(Caller c, String action, String jobId, String owner, long ownerUid) {
        if (c.admin() || (c.identified() && c.uid() == ownerUid)) {
            return;
        }
        throw new AccessDeniedException(action, jobId, Optional.of(owner), mayAct(Optional.of(owner)), c.user()
                + " (uid " + c.uid() + ") may not " + action + " job " + jobId + ": it is " + owner + "'s (uid "
                + ownerUid + "); " + owner + " and " + admins() + " may");
    }

    /** @throws AccessDeniedException unless the caller is an admin */
    void checkAdmin(Caller c, String action, String subject) {
        if (!c.admin()) {
            throw new AccessDeniedException(action, subject, Optional.empty(), mayAct(Optional.empty()), c.user()
                    + " (uid " + c.uid() + ") may not " + action + " " + subject + ": only " + admins() + " may");
        }
    }

    /** @throws AccessDeniedException unless the kernel vouched for the caller (or it is an admin) */
    void checkIdentified(Caller c, String action) {
        if (!c.identified() && !c.admin()) {
            throw new AccessDeniedException(action, "node", Optional.empty(), List.of("any user of the node's"
                    + " socket"), action + " needs a caller the kernel vouches for (the node service's Unix socket);"
                            + " " + c.user() + " is not one");
        }
    }

    /**
     * @param asked the owner a request names, if any
     * @throws AccessDeniedException when a caller who is not an admin names an owner other than itself
     */
    void checkOwner(Caller c, Optional<String> asked) {
        if (asked.isPresent() && !asked.get().equals(c.user()) && !c.admin()) {
            throw new AccessDeniedException("allocate", "owner " + asked.get(), Optional.empty(),
                    mayAct(Optional.empty()), c.user() + " (uid " + c.uid() + ") may not allocate for owner \""
                            + asked.get() + "\": allocations are owned by their caller (" + c.user() + "); only "
                            + admins() + " may name another owner");
        }
    }
}
