package io.gpusched.cli.adversarial.review61;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingStore;
import io.gpusched.cli.Node;
import io.gpusched.cli.RunSampler;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 61: `gpusched run`'s sampler (RunSampler) in the deployed shape of docs/SERVICE.md, "Engines": the service
 * keeps its accounting store under {@code gpu.service.private_dir} ("console.token, jobs/ ..., accounting/"), and
 * `gpusched report` and `status` read it there when given the same {@code --config}. RunSampler opens the store in the
 * state directory itself ({@code AccountingStore.at(node.stateDirectory())}), ignoring {@code private_dir}.
 */
class RunSamplerBesideAServiceWithAPrivateDirTest {
    @TempDir
    Path base;

    /**
     * RunSampler's own Javadoc: it samples "when no other process is (no console or service on the node)", and "when
     * another process holds the sampler lock ... it samples nothing". The service's sampler holds the lock of
     * {@code <private_dir>/accounting}; a `gpusched --config ... --state-dir /var/lib/gpusched run` (an engine's
     * user, or root, on the shared state directory: a local run beside the running service) looks for the lock in
     * {@code <state_dir>/accounting}, finds it free and becomes a second sampler of the node, beside the service's:
     * its records (and its idle flags) go to a store in the group-writable shared directory that neither `report` nor
     * `status` reads.
     */
    @Test
    void gpuschedRunIsNoSecondSamplerBesideTheServicesSamplerInItsPrivateDir() throws Exception {
        Path own = Files.createDirectory(base.resolve("own"), PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rwx------")));
        Path state = Files.createDirectory(base.resolve("state"));
        Path config = Files.writeString(base.resolve("gpusched.yaml"), "gpu:\n  service:\n    private_dir: " + own
                + "\n");
        // the running service's sampler: it holds the lock of the store it writes, <private_dir>/accounting
        AccountingStore.Writer service = AccountingStore.at(own).openWriter().orElseThrow();
        try (Node node = Node.open(Optional.of("dgx1-v100"), Optional.of(config), Optional.of(state),
                Optional.empty(), Optional.empty())) {
            RunSampler run = RunSampler.start(node, Optional.of(config));
            try {
                Path second = node.stateDirectory().resolve(AccountingStore.DIR);
                assertThat(run.sampling()).as("the service's sampler holds the node's store (%s): `gpusched run` with"
                        + " the same --config must sample nothing, not become a second sampler writing %s",
                        own.resolve(AccountingStore.DIR), second).isFalse();
            } finally {
                run.close();
            }
        } finally {
            service.close();
        }
    }
}
