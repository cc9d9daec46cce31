package io.gpusched.client;

import java.util.Objects;

/**
 * One waiting request of the node service's fair queue ({@code GET /api/v1/queue}).
 *
 * @param position its place in the queue, 1 first
 * @param user     who waits
 * @param uid      their uid, or null where the service does not say
 * @param request  what they asked for, as the service describes it
 * @param since    since when they wait (ISO-8601)
 */
public record QueueEntry(int position, String user, Long uid, String request, String since) {

    /** @throws NullPointerException when user, request or since is null */
    public QueueEntry {
        Objects.requireNonNull(user, "user");
        Objects.requireNonNull(request, "request");
        Objects.requireNonNull(since, "since");
    }
}
