package io.gpusched.client;

import io.gpusched.core.GpuException;
import java.nio.file.Path;
import java.util.Objects;
import java.util.Optional;

/**
 * A request to the node service could not be carried out: no service answers on the socket, it did not answer in
 * time, it answered something that is not the service's protocol or too large, the connection ended before the answer
 * did, or the service refused with a code that has no type of its own in the library ({@link #reason()}). Refusals
 * that have one are thrown as that type instead ({@link io.gpusched.core.GpuAllocationException},
 * {@link io.gpusched.core.AccessDeniedException}, ...). The message names the socket and what to do.
 */
public class NodeServiceException extends GpuException {
    private static final long serialVersionUID = 1L;

    /** What went wrong. */
    public enum Kind {
        /** Nothing answers on the socket: it does not exist, is not a socket, or refuses the connection. */
        UNREACHABLE,
        /** The socket's permissions do not let the caller connect (a service limited to a group). */
        NOT_PERMITTED,
        /** The service did not answer, or stopped answering, within the client's time limit. */
        TIMEOUT,
        /** The answer is not the service's protocol (not HTTP/1.1, not the JSON expected). */
        BAD_ANSWER,
        /** The answer is over the client's size limit. */
        ANSWER_TOO_LARGE,
        /** The connection ended before the answer did (the service stopped, or was killed). */
        CONNECTION_LOST,
        /** The service refused the request with an error of its own ({@link #reason()}, {@link #status()}). */
        REFUSED
    }

    private final Kind kind;
    private final transient Path socket;
    private final int status;
    private final String reason;

    /**
     * @param kind    what went wrong
     * @param socket  the service's socket
     * @param status  the HTTP status of the answer, or 0 when there was none
     * @param reason  the service's reason code ({@code TOO_MANY_CONNECTIONS}, ...), or the kind's name
     * @param message a sentence naming the socket and what to do
     * @param cause   the underlying failure, or null
     */
    public NodeServiceException(Kind kind, Path socket, int status, String reason, String message, Throwable cause) {
        super(message, cause);
        this.kind = Objects.requireNonNull(kind, "kind");
        this.socket = Objects.requireNonNull(socket, "socket");
        this.status = status;
        this.reason = Objects.requireNonNull(reason, "reason");
    }

    /** @return what went wrong */
    public Kind kind() {
        return kind;
    }

    /** @return the service's socket */
    public Path socket() {
        return socket;
    }

    /** @return the HTTP status of the service's answer, if there was one */
    public Optional<Integer> status() {
        return status == 0 ? Optional.empty() : Optional.of(status);
    }

    /** @return the service's reason code when it refused ({@code UNKNOWN_JOB}, ...), else the kind's name */
    public String reason() {
        return reason;
    }
}
