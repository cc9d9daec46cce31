package io.gpusched.cli.adversarial.run;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.cli.adversarial.JarRun;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 36 (a running run's GPUs must not be handed out while its job runs; the fix ab723ec records an unfenced job's
 * process and refuses {@code release} while it lives), from the jar as a user runs it: {@code gpusched run
 * --no-isolation --lease 3s} under {@code leases: {release_on_expiry: true}} (README: the lease "ends the allocation
 * ..., ending its job cgroup first"). The unfenced job has no cgroup, and its recorded process is not consulted when
 * the lease ends the allocation: once the lease is over, the next {@code allocate --gpu=8} gets the same 8 GPUs while
 * the job still runs on them.
 */
@Tag("adversarial")
class UnfencedRunLeaseExpiryIT {
    @TempDir
    Path tmp;

    private String[] g(String... args) {
        String[] all = new String[args.length + 4];
        all[0] = "--simulate";
        all[1] = "dgx1-v100";
        all[2] = "--state-dir";
        all[3] = tmp.resolve("state").toString();
        System.arraycopy(args, 0, all, 4, args.length);
        return all;
    }

    @Test
    void anEndedLeaseDoesNotHandOutTheGpusOfARunningUnfencedJob() throws Exception {
        String mark = "gsl-" + UUID.randomUUID().toString().substring(0, 8);
        Path config = Files.writeString(tmp.resolve("gpusched.yaml"), "gpu:\n  leases: {release_on_expiry: true}\n");
        Process run = JarRun.start(tmp, g("--config", config.toString(), "run", "--no-isolation", "--gpu=8",
                "--lease=3s", "--", "/bin/sh", "-c", "while :; do sleep 1; done", mark));
        try {
            BufferedReader r = new BufferedReader(new InputStreamReader(run.getInputStream(), StandardCharsets.UTF_8));
            String line;
            StringBuilder seen = new StringBuilder();
            while ((line = r.readLine()) != null && !line.contains("GPUs [")) {
                seen.append(line).append('\n');
            }
            assertThat(line).as("the run started: " + seen).isNotNull();
            Optional<ProcessHandle> job = Optional.empty();
            for (int i = 0; i < 600 && job.isEmpty(); i++) {
                job = marked(mark);
                if (job.isEmpty()) {
                    Thread.sleep(100);
                }
            }
            assertThat(job).as("the job's shell").isPresent();
            Thread.sleep(5_000); // past the 3 s lease (not an assertion on time: the lease must have ended by now)
            JarRun.Result next = JarRun.run(tmp, g("allocate", "--gpu=8"));
            assertThat(next.exit() == 0 && job.get().isAlive())
                    .as("the lease of the unfenced run ended and allocate --gpu=8 got its GPUs (%s) while the run's"
                            + " job (pid %d) still runs on them", next.out().lines().findFirst().orElse(""),
                            job.get().pid())
                    .isFalse();
        } finally {
            marked(mark).ifPresent(ProcessHandle::destroyForcibly);
            run.destroyForcibly();
            run.waitFor(30, TimeUnit.SECONDS);
            marked(mark).ifPresent(ProcessHandle::destroyForcibly);
        }
    }

    /** @return the job's shell: the process whose arguments hold {@code mark} */
    private static Optional<ProcessHandle> marked(String mark) {
        return ProcessHandle.allProcesses()
                .filter(h -> h.info().arguments().map(a -> List.of(a).contains(mark)).orElse(false))
                .filter(h -> h.info().command().map(c -> c.endsWith("sh")).orElse(false))
                .findFirst();
    }
}
