package io.gpusched.cli.adversarial.lease;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.cli.adversarial.JarRun;
import java.nio.file.Path;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * README: "a usage error, such as an option given twice or a number out of range, is one line naming the option,
 * exit 2". A lease the duration parser accepts (up to 9 digits and a unit) but whose nanoseconds do not fit in a long
 * (over about 292 years: the ledger records {@code maxDurationNanos}) ends {@code allocate} with
 * {@code gpusched: long overflow}, exit 1: an ArithmeticException's message, naming neither the option nor the valid
 * range.
 */
@Tag("adversarial")
class LeaseOutOfRangeIT {
    @TempDir
    Path tmp;

    @ParameterizedTest
    @ValueSource(strings = {"200000d", "999999999d", "9999999h"})
    void aLeaseTooLongToRecordIsAUsageErrorNamingTheOption(String lease) throws Exception {
        String state = tmp.resolve("state").toString();
        JarRun.Result r = JarRun.run(tmp, "--simulate", "dgx1-v100", "--state-dir", state, "allocate", "--gpu=1",
                "--lease=" + lease);
        assertThat(r.errLines()).as(r.err()).hasSize(1);
        assertThat(r.errLines().get(0)).as("the refusal names the option").contains("--lease");
        assertThat(r.exit()).as(r.err()).isEqualTo(2);
        JarRun.Result st = JarRun.run(tmp, "--simulate", "dgx1-v100", "--state-dir", state, "--json", "status");
        assertThat(new ObjectMapper().readTree(st.out()).get("allocations")).as("nothing allocated").isEmpty();
    }
}
