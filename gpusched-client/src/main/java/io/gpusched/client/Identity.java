package io.gpusched.client;

import java.util.List;
import java.util.Objects;

/**
 * Who the node service takes the caller to be ({@code GET /api/v1/whoami}): the kernel's peer credentials of the
 * connection, with the names looked up from them. Nothing a client sends changes it.
 *
 * @param uid    the caller's uid
 * @param gid    the caller's primary gid
 * @param user   the user name
 * @param groups the caller's groups, primary and supplementary
 * @param admin  whether the caller may act on anyone's allocations and jobs (root, or a member of the admin group)
 */
public record Identity(long uid, long gid, String user, List<String> groups, boolean admin) {

    /** Copies the list. */
    public Identity {
        Objects.requireNonNull(user, "user");
        groups = List.copyOf(groups);
    }
}
