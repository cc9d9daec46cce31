package io.gpusched.core.devices;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link CharMajors}: the kernel's {@code /proc/devices} read leniently and within bounds (a fixture root may hold a
 * FIFO, a device or a huge file), the {@code char_majors} form read strictly.
 */
class CharMajorsTest {
    @TempDir
    Path dir;

    @Test
    void readsTheCharacterPartOnlyFirstMajorOfANameWins() {
        CharMajors m = CharMajors.parseProcDevices("Character devices:\n  1 mem\n  4 /dev/vc/0\n  4 tty\n"
                + "195 nvidia-frontend\n508 nvidia-uvm\n509 nvidia-uvm\n9999 big\nnonsense line\n\n"
                + "Block devices:\n  8 sd\n  9 nvidia-caps\n");
        assertThat(m.asMap()).isEqualTo(Map.of("/dev/vc/0", 4, "mem", 1, "nvidia-frontend", 195, "nvidia-uvm", 508,
                "tty", 4));
        assertThat(m.format()).isEqualTo("/dev/vc/0=4,mem=1,nvidia-frontend=195,nvidia-uvm=508,tty=4");
        assertThat(m.major("nvidia-caps")).as("a block device").isEmpty();
        assertThat(m.major("big")).as("no major above 4095").isEmpty();
        assertThat(CharMajors.parse(m.format())).isEqualTo(m);
    }

    @Test
    void anAbsentDirectoryOrUnreadableFileIsNoMajors() throws Exception {
        assertThat(CharMajors.read(dir.resolve("nope"))).isEqualTo(CharMajors.none());
        Files.createDirectories(dir.resolve("dirproc/devices"));
        assertThat(CharMajors.read(dir.resolve("dirproc"))).isEqualTo(CharMajors.none());
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aFifoOrADeviceInPlaceOfTheFileIsNeverOpened() throws Exception {
        Path fifo = Files.createDirectories(dir.resolve("fifo"));
        Process p = new ProcessBuilder("mkfifo", fifo.resolve("devices").toString()).start();
        assertThat(p.waitFor()).isZero();
        assertThat(CharMajors.read(fifo)).as("a FIFO would block the reader").isEqualTo(CharMajors.none());
        Path zero = Files.createDirectories(dir.resolve("zero"));
        Files.createSymbolicLink(zero.resolve("devices"), Path.of("/dev/zero"));
        assertThat(CharMajors.read(zero)).as("/dev/zero would never end").isEqualTo(CharMajors.none());
    }

    @Test
    void aHugeFileIsReadOnlyToItsFirst64KiB() throws Exception {
        Path big = Files.createDirectories(dir.resolve("big"));
        StringBuilder b = new StringBuilder("Character devices:\n");
        while (b.length() < CharMajors.MAX_BYTES) {
            b.append("  1 mem\n");
        }
        b.append("508 nvidia-uvm\n");
        Files.writeString(big.resolve("devices"), b);
        CharMajors m = CharMajors.read(big);
        assertThat(m.major("mem")).hasValue(1);
        assertThat(m.major("nvidia-uvm")).as("beyond the bound").isEmpty();
    }

    @Test
    void theDescribedFormIsStrictAndNamesWhatIsWrong() {
        assertThat(CharMajors.parse("nvidia-uvm=510, nvidia-caps=235").format())
                .isEqualTo("nvidia-caps=235,nvidia-uvm=510");
        assertThat(CharMajors.parse("")).isEqualTo(CharMajors.none());
        for (String bad : new String[]{"nvidia-uvm", "nvidia-uvm=0", "nvidia-uvm=4096", "a b=1", "=5",
            "nvidia-uvm=5x", "nvidia-uvm=\u0665"}) {
            assertThatThrownBy(() -> CharMajors.parse(bad)).as(bad).isExactlyInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("\"" + bad + "\"").hasMessageContaining("expected");
        }
        assertThatThrownBy(() -> CharMajors.parse("a=1,a=2")).hasMessageContaining("give a twice");
        assertThatThrownBy(() -> CharMajors.of(Map.of("x", 0))).hasMessageContaining("1 to 4095");
    }
}
