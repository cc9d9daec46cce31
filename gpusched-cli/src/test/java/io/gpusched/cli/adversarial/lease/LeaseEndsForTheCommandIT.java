package io.gpusched.cli.adversarial.lease;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.cli.adversarial.JarRun;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 36 item 2, exactly as filed, against the README's command table ("`gpusched allocate ... [--lease 2h]`:
 * allocates ...; it persists until `release` or its lease ends") and its global note ("`gpusched allocate` stays
 * detached until `release` or its `--lease` ends"): with no configuration at all, a lease given on the command line
 * ends its allocation for the next command. Every command is a process of its own (the jar), none with a
 * maintenance thread.
 */
@Tag("adversarial")
class LeaseEndsForTheCommandIT {
    @TempDir
    Path tmp;

    private JarRun.Result g(String... args) throws Exception {
        String[] all = new String[args.length + 4];
        all[0] = "--simulate";
        all[1] = "dgx1-v100";
        all[2] = "--state-dir";
        all[3] = tmp.resolve("state").toString();
        System.arraycopy(args, 0, all, 4, args.length);
        return JarRun.run(tmp, all);
    }

    /** Waits (no assertion on time) until a lease of {@code lease} granted before {@code returned} has ended. */
    private static void waitPast(Instant returned, Duration lease) throws Exception {
        Instant end = returned.plus(lease).plusMillis(200);
        while (Instant.now().isBefore(end)) {
            Thread.sleep(Math.max(1, Duration.between(Instant.now(), end).toMillis()));
        }
    }

    @Test
    void aCommandLineLeaseEndsItsAllocationWithTheDefaultSettings() throws Exception {
        JarRun.Result a = g("allocate", "--gpu=8", "--lease=2s");
        Instant returned = Instant.now();
        assertThat(a.exit()).as(a.err()).isZero();
        waitPast(returned, Duration.ofSeconds(2));
        JarRun.Result next = g("allocate", "--gpu=1");
        assertThat(next.exit())
                .as("README: an allocation 'persists until release or its lease ends'; 5 s after a 2 s lease the"
                        + " next allocate was refused: " + next.err())
                .isZero();
    }
}
