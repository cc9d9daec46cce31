package io.gpusched.cli.adversarial.run;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.cli.adversarial.JarRun;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 36, rough edges: "`release` of an allocation a running `gpusched run` holds succeeds silently, and the job
 * keeps running on GPUs the next caller gets: refuse it (or end the job first), and say which". README: "`release` of
 * an allocation whose job is running is refused (`gpusched: JOB_RUNNING: ...`)". The fix keys the refusal on the job
 * cgroup, and a run with {@code --no-isolation} has none (the only way a user without root or cgroups can run at
 * all, README: "On a local ledger without root or cgroups it says why and runs unfenced only with
 * --no-isolation"), so while its job runs, {@code release} of its allocation still succeeds silently, the job keeps
 * running, and the next {@code allocate} gets the same GPUs. Its run process is alive (the allocation is bound to
 * it), so whether the job runs is known.
 */
@Tag("adversarial")
class ReleaseOfARunningUnfencedRunIT {
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
    void releaseOfARunningUnfencedRunIsRefusedOrEndsItsJob() throws Exception {
        String mark = "gsr-" + UUID.randomUUID().toString().substring(0, 8);
        // the job: a shell (its argv names the mark, so the test finds it) that sleeps a second at a time
        Process run = JarRun.start(tmp, g("run", "--no-isolation", "--gpu=8", "--", "/bin/sh", "-c",
                "while :; do sleep 1; done", mark));
        try {
            BufferedReader r = new BufferedReader(new InputStreamReader(run.getInputStream(), StandardCharsets.UTF_8));
            String line;
            StringBuilder seen = new StringBuilder();
            while ((line = r.readLine()) != null && !line.contains("GPUs [")) {
                seen.append(line).append('\n');
            }
            assertThat(line).as("the run started: " + seen).isNotNull();
            // the run announces its GPUs just before it starts the job: wait for the job (JarRun's hang limit)
            Optional<ProcessHandle> job = Optional.empty();
            for (int i = 0; i < 600 && job.isEmpty(); i++) {
                job = marked(mark);
                if (job.isEmpty()) {
                    Thread.sleep(100);
                }
            }
            assertThat(job).as("the job's shell").isPresent();
            JsonNode st = new ObjectMapper().readTree(JarRun.run(tmp, g("--json", "status")).out());
            String id = st.get("allocations").get(0).get("id").asText();

            JarRun.Result release = JarRun.run(tmp, g("release", id));
            if (release.exit() == 0) {
                // "or end the job first": then the job is gone when release returns
                assertThat(job.get().isAlive())
                        .as("release of " + id + " exited 0 (" + release.out().strip() + ") while the run's job still"
                                + " runs on its GPUs; the next allocate gets them: "
                                + JarRun.run(tmp, g("allocate", "--gpu=8")).out().lines().findFirst().orElse(""))
                        .isFalse();
            } else {
                assertThat(release.err()).contains("JOB_RUNNING");
            }
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
