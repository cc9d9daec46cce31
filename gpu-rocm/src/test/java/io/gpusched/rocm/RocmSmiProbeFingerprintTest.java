package io.gpusched.rocm;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Instant;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The cache key of the ROCm SMI child probe: a verdict may be reused only while nothing the library reads at init has
 * changed. Each case changes one thing in a tree of our own and expects a new key; live counters must not change it.
 */
class RocmSmiProbeFingerprintTest {

    @Test
    void everyInputOfTheLibraryChangesTheKeyAndLiveCountersDoNot(@TempDir Path root) throws Exception {
        Path node = Files.createDirectories(root.resolve("sys/class/kfd/kfd/topology/nodes/1"));
        Files.writeString(node.resolve("properties"), "simd_count 304\ndrm_render_minor 128\n");
        Files.writeString(node.resolve("gpu_id"), "1234\n");
        Path links = Files.createDirectories(node.resolve("io_links/0"));
        Files.writeString(links.resolve("properties"), "type 11\nweight 13\n");
        Path dev = Files.createDirectories(root.resolve("sys/devices/pci0000:00/0000:0c:00.0"));
        Files.writeString(dev.resolve("vendor"), "0x1002\n");
        Files.writeString(dev.resolve("device"), "0x74a1\n");
        Files.writeString(dev.resolve("gpu_busy_percent"), "0\n");
        Path card = Files.createDirectories(root.resolve("sys/class/drm/card0"));
        Files.createSymbolicLink(card.resolve("device"), dev);
        Path lib = Files.createDirectories(root.resolve("opt/rocm/lib")).resolve("librocm_smi64.so.5");
        Files.writeString(lib, "ELF v5.2.3");

        String explicit = RocmSmiProbe.fingerprint(Optional.of(lib), root);
        String searched = RocmSmiProbe.fingerprint(Optional.empty(), root);
        assertThat(RocmSmiProbe.fingerprint(Optional.of(lib), root)).as("stable").isEqualTo(explicit);
        assertThat(RocmSmiProbe.fingerprint(Optional.empty(), root)).isEqualTo(searched);

        Files.writeString(dev.resolve("gpu_busy_percent"), "97\n");
        assertThat(RocmSmiProbe.fingerprint(Optional.of(lib), root)).as("a live counter keeps the cache")
                .isEqualTo(explicit);

        // the library upgraded in place: same path, other size and time
        Files.writeString(lib, "ELF v6.0.0 (longer)");
        Files.setLastModifiedTime(lib, FileTime.from(Instant.parse("2030-01-01T00:00:00Z")));
        String upgraded = RocmSmiProbe.fingerprint(Optional.of(lib), root);
        assertThat(upgraded).as("library replaced at the same path").isNotEqualTo(explicit);
        String searchedUpgraded = RocmSmiProbe.fingerprint(Optional.empty(), root);
        assertThat(searchedUpgraded).as("library found by search, replaced").isNotEqualTo(searched);

        Files.writeString(dev.resolve("device"), "0x74b5\n");
        String otherDevice = RocmSmiProbe.fingerprint(Optional.of(lib), root);
        assertThat(otherDevice).as("a DRM card's device id changed").isNotEqualTo(upgraded);

        Path dev2 = Files.createDirectories(root.resolve("sys/devices/pci0000:00/0000:0d:00.0"));
        Files.writeString(dev2.resolve("vendor"), "0x1002\n");
        Files.writeString(dev2.resolve("device"), "0x74b5\n");
        Files.delete(card.resolve("device"));
        Files.createSymbolicLink(card.resolve("device"), dev2);
        String relinked = RocmSmiProbe.fingerprint(Optional.of(lib), root);
        assertThat(relinked).as("same ids, another PCI function behind card0").isNotEqualTo(otherDevice);

        Path kfdLink = node.resolve("io_links/1");
        Files.createSymbolicLink(kfdLink, links);
        String withLink = RocmSmiProbe.fingerprint(Optional.of(lib), root);
        Files.delete(kfdLink);
        Files.createSymbolicLink(kfdLink, node);
        assertThat(RocmSmiProbe.fingerprint(Optional.of(lib), root)).as("a KFD link pointing elsewhere")
                .isNotEqualTo(withLink);

        Files.writeString(links.resolve("properties"), "type 11\nweight 41\n");
        assertThat(RocmSmiProbe.fingerprint(Optional.of(lib), root)).as("a KFD value").isNotEqualTo(withLink);
    }
}
