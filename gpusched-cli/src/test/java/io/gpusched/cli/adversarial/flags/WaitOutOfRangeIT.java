package io.gpusched.cli.adversarial.flags;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.cli.adversarial.JarRun;
import java.nio.file.Path;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * README: "a usage error, such as an option given twice or a number out of range, is one line naming the option, exit
 * 2". {@code --wait} takes what the duration parser accepts (up to 9 digits and a unit), but a wait over about 292
 * years overflows its nanoseconds: {@code allocate --gpu=1 --wait=200000d} and {@code run --wait=200000d} on a node
 * whose GPUs are all free end with {@code gpusched: long overflow}, exit 1 (nothing names {@code --wait}); the same
 * text for {@code renew --lease=200000d} is accepted.
 */
@Tag("adversarial")
class WaitOutOfRangeIT {
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

    private static void allocatedOrAUsageErrorNamingWait(JarRun.Result r, String what) {
        if (r.exit() == 0) {
            return; // the GPUs are free: a wait of any length is no wait
        }
        assertThat(r.errLines()).as(what + ": " + r.err()).isNotEmpty();
        assertThat(r.errLines().get(r.errLines().size() - 1)).as(what + " refused without naming --wait")
                .contains("--wait");
        assertThat(r.exit()).as(what + ": " + r.err()).isEqualTo(2);
    }

    @Test
    void aWaitTooLongToCountIsGrantedOrAUsageErrorNamingTheOption() throws Exception {
        allocatedOrAUsageErrorNamingWait(g("allocate", "--gpu=1", "--wait=200000d"), "allocate --wait=200000d");
        allocatedOrAUsageErrorNamingWait(g("run", "--no-isolation", "--gpu=1", "--wait=200000d", "--", "true"),
                "run --wait=200000d");
    }
}
