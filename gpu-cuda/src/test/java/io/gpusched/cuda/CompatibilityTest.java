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
                .contains("the node's driver is 535.261.03").contains("Upgrade the driver");
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

    /** NVIDIA's "CUDA Toolkit and Corresponding Driver Versions", Linux x86_64, GA rows, typed from the notes. */
    @ParameterizedTest
    @CsvSource({"9.0, 384.81", "9.1, 390.46", "9.2, 396.26", "10.0, 410.48", "10.1, 418.39", "10.2, 440.33",
        "11.0, 450.51.05", "11.1, 455.23", "11.2, 460.27.03", "11.3, 465.19.01", "11.4, 470.42.01",
        "11.5, 495.29.05", "11.6, 510.39.01", "11.7, 515.43.04", "11.8, 520.61.05", "12.0, 525.60.13",
        "12.1, 530.30.02", "12.2, 535.54.03", "12.3, 545.23.06", "12.4, 550.54.14", "12.5, 555.42.02",
        "12.6, 560.28.03", "12.8, 570.26", "12.9, 575.51.03", "13.0, 580.65.06"})
    void theTableHoldsNvidiasMinimumDriversFromCuda9(String toolkit, String driver) {
        assertThat(TABLE.minimumDriver(CudaVersion.parse(toolkit))).contains(DriverVersion.parse(driver));
        assertThat(judge(toolkit, driver).verdict()).isEqualTo(Verdict.COMPATIBLE);
        // one step below the minimum does not run natively
        String[] parts = driver.split("\\.");
        String below = (Integer.parseInt(parts[0]) - 1) + ".99";
        assertThat(judge(toolkit, below).verdict()).isNotEqualTo(Verdict.COMPATIBLE);
    }

    @Test
    void cuda101OnDriver41839Runs() {
        Compatibility c = judge("10.1", "418.39");
        assertThat(c.verdict()).isEqualTo(Verdict.COMPATIBLE);
        assertThat(c.message()).doesNotContain("newer than");
    }

    @Test
    void unknownOldAndUnknownNewAreWordedDifferently() {
        Compatibility old = judge("8.0", "375.26");
        assertThat(old.verdict()).isEqualTo(Verdict.UNKNOWN);
        assertThat(old.message()).contains("older than gpusched's driver table").contains("starts at CUDA 9.0")
                .doesNotContain("newer than");
        assertThat(judge("8.0", "418.39").verdict()).as("drivers run older toolkits").isEqualTo(Verdict.COMPATIBLE);

        Compatibility newTooOld = judge("14.0", "535.261.03");
        assertThat(newTooOld.verdict()).isEqualTo(Verdict.INCOMPATIBLE);
        assertThat(newTooOld.message()).contains("newer than gpusched's driver table").doesNotContain("older than");
        Compatibility newUnknown = judge("14.0", "700.10");
        assertThat(newUnknown.verdict()).isEqualTo(Verdict.UNKNOWN);
        assertThat(newUnknown.message()).contains("newer than gpusched's driver table").contains("cannot tell");
    }

    @Test
    void aRefusalNamesTheMinorVersionFloorOnlyWhereItIsLower() {
        Compatibility c130 = judge("13.0", "575.51.03");
        assertThat(c130.verdict()).isEqualTo(Verdict.INCOMPATIBLE);
        assertThat(c130.message()).contains("needs driver >= 580.65.06").doesNotContain("or >= 580.65.06")
                .doesNotContain("580.65.06 (or");
        Compatibility c124 = Compatibility.judge(TABLE, CudaVersion.parse("12.4"), DriverVersion.parse("520.61.05"),
                Optional.empty(), Optional.empty(), true);
        assertThat(c124.message()).contains("needs driver >= 550.54.14 (or >= 525.60.13 with minor version"
                + " compatibility)");
    }

    @ParameterizedTest
    @CsvSource({"NVIDIA A2, true", "NVIDIA A10, true", "NVIDIA A10G, true", "NVIDIA A16, true", "NVIDIA A30, true",
        "NVIDIA A40, true", "NVIDIA A100-SXM4-80GB, true", "NVIDIA A100 80GB PCIe, true",
        "NVIDIA A100-SXM4-40GB MIG 3g.20gb, true", "NVIDIA H100 80GB HBM3, true", "NVIDIA H100 NVL, true",
        "NVIDIA H200, true", "NVIDIA H20, true", "NVIDIA H800, true", "NVIDIA L4, true", "NVIDIA L40, true",
        "NVIDIA L40S, true", "NVIDIA B200, true", "NVIDIA GB200, true", "NVIDIA GH200 480GB, true",
        "Tesla V100-SXM2-16GB, true", "Tesla T4, true", "Tesla K80, true",
        "NVIDIA GeForce RTX 4090, false", "NVIDIA GeForce GTX 1080 Ti, false", "NVIDIA RTX A6000, false",
        "Quadro RTX 8000, false", "NVIDIA TITAN RTX, false", "NVIDIA RTX 6000 Ada Generation, false",
        "NVIDIA RTX A1000 Laptop GPU, false", "NVIDIA GeForce RTX 3080 Ti Laptop GPU, false"})
    void dataCentreGpusAreData(String name, boolean dataCentre) {
        assertThat(DataCenterGpus.isDataCenter(name)).as(name).isEqualTo(dataCentre);
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
        // ">=12" is what the refusal of "12.x" forms offered users; it means 12.0 or newer
        assertThat(CudaRequirement.parse(">=12").accepts(CudaVersion.parse("12.0"))).isTrue();
        assertThat(CudaRequirement.parse(">=12").accepts(CudaVersion.parse("13.1"))).isTrue();
        assertThat(CudaRequirement.parse(">=12").accepts(CudaVersion.parse("11.8"))).isFalse();
        assertThatThrownBy(() -> CudaRequirement.parse(">=twelve")).hasMessageContaining(">=12.1")
                .hasMessageContaining(">=12\"");
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
