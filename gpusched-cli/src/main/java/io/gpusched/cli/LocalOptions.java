package io.gpusched.cli;

import java.nio.file.Path;
import java.util.Objects;
import java.util.Optional;

/**
 * Options that only a command's local ledger (this process) can follow: the node service decides them itself (its
 * strategy, its job cgroups, always fenced), so a command served by the service refuses them rather than ignore them.
 *
 * @param strategy     {@code --strategy}: overrides {@code gpu.strategy}
 * @param noIsolation  {@code --no-isolation}: run a job without a cgroup fence
 * @param cgroupParent {@code --cgroup-parent}: where a job's cgroup is made
 * @param inheritIo    whether a local job's standard streams are this process's own (false: its output is piped to
 *                     the command's output stream, as for tests running the command in-process)
 */
public record LocalOptions(Optional<String> strategy, boolean noIsolation, Optional<Path> cgroupParent,
        boolean inheritIo) {

    /** No local option. */
    public static final LocalOptions NONE = new LocalOptions(Optional.empty(), false, Optional.empty(), true);

    /** @throws NullPointerException when an optional is null */
    public LocalOptions {
        Objects.requireNonNull(strategy, "strategy");
        Objects.requireNonNull(cgroupParent, "cgroupParent");
    }

    /** @return the options given, by their flags, empty when none */
    public Optional<String> given() {
        StringBuilder b = new StringBuilder();
        strategy.ifPresent(s -> b.append("--strategy ").append(s));
        if (noIsolation) {
            b.append(b.length() == 0 ? "" : ", ").append("--no-isolation");
        }
        cgroupParent.ifPresent(c -> b.append(b.length() == 0 ? "" : ", ").append("--cgroup-parent ").append(c));
        return b.length() == 0 ? Optional.empty() : Optional.of(b.toString());
    }
}
