package io.gpusched.core;

import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * A caller may not do this to that: release, renew or cancel an allocation or job it does not own, name another owner,
 * drain a GPU without being an admin. The message says who holds the thing and who may act on it.
 */
public class AccessDeniedException extends GpuException {
    private final String action;
    private final String subject;
    private final Optional<String> holder;
    private final List<String> mayAct;

    /**
     * @param action  what was refused, e.g. {@code "release"}
     * @param subject what it was refused on, e.g. an allocation id
     * @param holder  who holds the subject, when someone does
     * @param mayAct  who may do it (user names, {@code "root"}, {@code "group gpuadmin"})
     * @param message the sentence a user reads, naming the holder and who may act
     */
    public AccessDeniedException(String action, String subject, Optional<String> holder, List<String> mayAct,
            String message) {
        super(message);
        this.action = Objects.requireNonNull(action, "action");
        this.subject = Objects.requireNonNull(subject, "subject");
        this.holder = Objects.requireNonNull(holder, "holder");
        this.mayAct = List.copyOf(mayAct);
    }

    /** @return the refused action, e.g. {@code "release"} */
    public String action() {
        return action;
    }

    /** @return what the action was refused on (an allocation or job id, a device) */
    public String subject() {
        return subject;
    }

    /** @return who holds the subject, when someone does */
    public Optional<String> holder() {
        return holder;
    }

    /** @return who may do it: user names, {@code "root"}, {@code "group <name>"} */
    public List<String> mayAct() {
        return mayAct;
    }
}
