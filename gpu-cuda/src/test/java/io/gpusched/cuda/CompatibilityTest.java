package io.gpusched.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.cuda.Compatibility.Verdict;
import java.nio.file.Path;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class CompatibilityTest {
    static final CompatibilityTable TABLE = CompatibilityTable.builtIn();

    static Compatibility judge(String toolkit, String driver) {
        return Compatibility.judge(TABLE, CudaVersion.parse(toolkit), DriverVersion.parse(driver), Optional.empty(),
                Optional.empty(), true);
    }

    @ParameterizedTest
    @CsvSource({
            "13.0, 535.261.03, INCOMPATIBLE",
            "13.0, 580.65.06, COMPATIBLE",
            "13.0, 590.44.01, COMPATIBLE",
            "12.4, 525.60.13, COMPATIBLE_MINOR_VERSION",
            "12.4, 550.54.14, COMPATIBLE",
            "12.4, 520.61.05, INCOMPATIBLE",
            "11.8, 450.80.02, COMPATIBLE_MINOR_VERSION",
            "11.8, 450.51.05, INCOMPATIBLE",
            "10.2, 440.33, COMPATIBLE",
            "10.2, 418.39, INCOMPATIBLE",
            "13.1, 580.82.07, COMPATIBLE_MINOR_VERSION",
            "12.0, 580.65.06, COMPATIBLE"})
    void verdictsFollowTheTableAndTheMinorVersionRule(String toolkit, String driver, Verdict expected) {
        assertThat(judge(toolkit, driver).verdict()).isEqualTo(expected);
    }

    @Test
    void messagesSayWhatToDo() {
        assertThat(judge("13.0", "535.261.03").message()).contains("needs driver >= 580.65.06")
                .contains("this host has driver 535.261.03").contains("Upgrade the driver");
        assertThat(judge("13.0", "535.261.03").requiredDriver()).contains(DriverVersion.parse("580.65.06"));
        assertThat(judge("12.4", "525.60.13").message()).contains("minor version compatibility")
                .contains("needs driver >= 550.54.14");
    }

    @Test
    void forwardCompatibilityNeedsTheCompatDirAndADataCentreGpu() {
        Optional<Path> compat = Optional.of(Path.of("/usr/local/cuda-12.4/compat"));
        Compatibility dc = Compatibility.judge(TABLE, CudaVersion.parse("12.4"), DriverVersion.parse("470.82.01"),
                Optional.empty(), compat, true);
        assertThat(dc.verdict()).isEqualTo(Verdict.NEEDS_FORWARD_COMPAT);
        assertThat(dc.forwardCompatDir()).isEqualTo(compat);
        Compatibility consumer = Compatibility.judge(TABLE, CudaVersion.parse("12.4"),
                DriverVersion.parse("470.82.01"), Optional.empty(), compat, false);
        assertThat(consumer.verdict()).isEqualTo(Verdict.INCOMPATIBLE);
        assertThat(consumer.message()).contains("data-centre GPUs");
    }

    @Test
    void theDriversOwnCudaVersionCountsForReleasesTheTableLacks() {
        Compatibility c = Compatibility.judge(TABLE, CudaVersion.parse("13.3"), DriverVersion.parse("600.10"),
                Optional.of(CudaVersion.parse("13.4")), Optional.empty(), true);
        assertThat(c.verdict()).isEqualTo(Verdict.COMPATIBLE);
        Compatibility unknown = judge("13.3", "580.65.06");
        assertThat(unknown.verdict()).isEqualTo(Verdict.COMPATIBLE_MINOR_VERSION);
        assertThat(unknown.message()).contains("newer than gpusched's driver table");
    }

    @Test
    void versionsParseAndCompare() {
        assertThat(CudaVersion.parse("12.1.20230222")).isEqualTo(new CudaVersion(12, 1, 0));
        assertThat(CudaVersion.fromApiInt(12040)).isEqualTo(new CudaVersion(12, 4, 0));
        assertThat(CudaVersion.parse("12.4.127").atLeast(CudaVersion.parse("12.4"))).isTrue();
        assertThat(DriverVersion.parse("580.65.06")).isGreaterThan(DriverVersion.parse("580.65"))
                .isLessThan(DriverVersion.parse("580.82.07"));
        assertThat(DriverVersion.parse("570.124.06")).isGreaterThan(DriverVersion.parse("570.26"));
        assertThatThrownBy(() -> CudaVersion.parse("twelve")).hasMessageContaining("MAJOR.MINOR");
        assertThatThrownBy(() -> DriverVersion.parse("latest")).hasMessageContaining("580.65.06");
        assertThatThrownBy(() -> CudaRequirement.parse(">=12")).hasMessageContaining(">=12.1");
        assertThat(CudaRequirement.parse(">= 12.1").accepts(CudaVersion.parse("13.0"))).isTrue();
        assertThat(CudaRequirement.parse("12.4").accepts(CudaVersion.parse("12.4.127"))).isTrue();
        assertThat(CudaRequirement.parse("12.4").accepts(CudaVersion.parse("12.5"))).isFalse();
        assertThat(CudaRequirement.parse("11").accepts(CudaVersion.parse("11.8"))).isTrue();
        assertThat(CudaRequirement.parse("11").accepts(CudaVersion.parse("12.0"))).isFalse();
    }

    @Test
    void tableIsDataThatRejectsBadRows() {
        CompatibilityTable t = CompatibilityTable.parse("toolkits: {\"14.0\": \"700.1.2\"}\n"
                + "minor_version_floor: {\"14\": \"700.1.2\"}\n", "ext.yaml");
        assertThat(t.minimumDriver(CudaVersion.parse("14.0"))).contains(DriverVersion.parse("700.1.2"));
        assertThatThrownBy(() -> CompatibilityTable.parse("toolkits: {\"14.0\": soon}", "ext.yaml"))
                .hasMessageContaining("ext.yaml: toolkits.14.0");
        assertThatThrownBy(() -> CompatibilityTable.parse("drivers: {}", "ext.yaml"))
                .hasMessageContaining("ext.yaml: drivers: unknown key");
    }
}
