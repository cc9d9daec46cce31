package io.gpusched.core;

import java.io.IOException;
import java.nio.file.FileSystems;
import java.nio.file.attribute.GroupPrincipal;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.UserPrincipalNotFoundException;
import java.util.Objects;
import java.util.Optional;

/**
 * The group that may share a node ledger's state directory with its owner: {@code gpu.state_group}, else
 * {@code $GPUSCHED_STATE_GROUP}, else none. On a shared node the service (root) and the engines that run as service
 * users of their own (a NodeManager as {@code yarn}, Spark Workers, Flink TaskManagers) write one ledger through a
 * directory this group owns (setgid, {@code 2770}) and whose files it may write ({@code 0660}). A path whose group is
 * this group may be written by the group; any other group- or other-writable path is refused as before. Resolved once,
 * by name (or number), through the system's group database.
 */
final class StateGroup {
    /** The environment variable that names the group. */
    static final String ENV = "GPUSCHED_STATE_GROUP";
    /** No group shares state directories: only their owner writes them. */
    static final StateGroup NONE = new StateGroup(null, null);

    private final String name;
    private final GroupPrincipal principal;

    private StateGroup(String name, GroupPrincipal principal) {
        this.name = name;
        this.principal = principal;
    }

    /**
     * @param configured {@code gpu.state_group}, or empty to read {@code $GPUSCHED_STATE_GROUP}
     * @return the group, or {@link #NONE} when neither names one
     * @throws GpuConfigException when the named group does not exist on this host
     */
    static StateGroup of(Optional<String> configured) {
        Optional<String> n = configured.filter(s -> !s.isBlank())
                .or(() -> Optional.ofNullable(System.getenv(ENV)).filter(s -> !s.isBlank()));
        return n.map(StateGroup::named).orElse(NONE);
    }

    /** @return the group named {@code name} (a group name or number) */
    static StateGroup named(String name) {
        String g = Objects.requireNonNull(name, "name").strip();
        try {
            return new StateGroup(g, FileSystems.getDefault().getUserPrincipalLookupService()
                    .lookupPrincipalByGroupName(g));
        } catch (UserPrincipalNotFoundException e) {
            throw new GpuConfigException("gpu.state_group / " + ENV + ": there is no group \"" + g + "\" on this host;"
                    + " create it (groupadd " + g + ") and make it own the state directory, or leave the setting out"
                    + " (then only the directory's owner may write it)");
        } catch (IOException | UnsupportedOperationException e) {
            throw new GpuConfigException("gpu.state_group / " + ENV + ": cannot look up the group \"" + g + "\": "
                    + e.getMessage());
        }
    }

    /** @return whether a group shares state directories at all */
    boolean configured() {
        return principal != null;
    }

    /** @return the group's name as configured, or empty */
    Optional<String> name() {
        return Optional.ofNullable(name);
    }

    /** @return whether {@code a}'s group is this group (so the group may write it) */
    boolean owns(PosixFileAttributes a) {
        return principal != null && a != null && principal.equals(a.group());
    }

    @Override
    public String toString() {
        return principal == null ? "no state group" : "state group " + name;
    }
}
