package io.gpusched.cdi;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.GpuException;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@link CdiSpec#writeTo}: whole files, only into directories their owner alone may write. */
class ConfigFilesTest {
    @TempDir
    Path tmp;

    CdiSpec spec() {
        try (GpuInventory inv = GpuInventories.simulated("pcie-4xa10")) {
            return CdiSpec.of(inv, CdiOptions.defaults()).get(0);
        }
    }

    @Test
    void writesAtomicallyAndReplaces() throws Exception {
        Path cdi = tmp.resolve("cdi");
        Path f = spec().writeTo(cdi, "json");
        assertThat(f).isEqualTo(cdi.resolve("gpusched-nvidia.json"));
        assertThat(Files.readString(f)).isEqualTo(spec().toJson());
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(f))).isEqualTo("rw-r--r--");
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(cdi))).isEqualTo("rwxr-xr-x");
        Files.writeString(f, "old");
        spec().writeTo(cdi, "json");
        assertThat(Files.readString(f)).isEqualTo(spec().toJson());
        assertThat(spec().writeTo(cdi, "yaml").getFileName().toString()).isEqualTo("gpusched-nvidia.yaml");
        try (var s = Files.list(cdi)) {
            assertThat(s.map(p -> p.getFileName().toString()).toList())
                    .containsExactlyInAnyOrder("gpusched-nvidia.json", "gpusched-nvidia.yaml");
        }
    }

    @Test
    void refusesADirectoryOthersCanWrite() throws Exception {
        for (String mode : List.of("rwxrwxrwx", "rwxrwxr-x", "rwxr-xrwx")) {
            Path d = Files.createDirectories(tmp.resolve("d" + mode));
            Files.setPosixFilePermissions(d, PosixFilePermissions.fromString(mode));
            assertThatThrownBy(() -> spec().writeTo(d, "json")).isInstanceOf(GpuException.class)
                    .hasMessageContaining("refusing to write into " + d).hasMessageContaining("chmod go-w");
            try (var s = Files.list(d)) {
                assertThat(s.toList()).as("nothing written").isEmpty();
            }
        }
        Path real = Files.createDirectories(tmp.resolve("real"));
        Path link = Files.createSymbolicLink(tmp.resolve("link"), real);
        assertThatThrownBy(() -> spec().writeTo(link, "json")).isInstanceOf(GpuException.class)
                .hasMessageContaining("symbolic link");
    }

    @Test
    void refusesYmlAndUnknownFormats() {
        assertThatThrownBy(() -> spec().writeTo(tmp, "yml")).isInstanceOf(GpuException.class)
                .hasMessageContaining("not json or yaml");
    }
}
