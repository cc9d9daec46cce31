package io.gpusched.core.host;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.BackendUnavailableException;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuConfigException;
import io.gpusched.core.GpuInventory;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The one inventory spec syntax of every host. */
class InventorySpecTest {

    @Test
    void formsParseAndPrintBack() {
        assertThat(InventorySpec.parse("auto")).isEqualTo(InventorySpec.AUTO);
        assertThat(InventorySpec.parse(" ")).isEqualTo(InventorySpec.AUTO);
        InventorySpec sim = InventorySpec.parse("simulated:dgx1-v100");
        assertThat(sim.isSimulated()).isTrue();
        assertThat(sim.simulated()).isEqualTo("dgx1-v100");
        assertThat(InventorySpec.parse("nvml, procfs").providers()).containsExactly("nvml", "procfs");
        assertThat(InventorySpec.parse("NVML,nvml").providers()).containsExactly("nvml");
        for (String s : List.of("auto", "simulated:dgx-h100", "simulated:/a b/node.yaml", "nvml,procfs")) {
            assertThat(InventorySpec.parse(InventorySpec.parse(s).toString())).isEqualTo(InventorySpec.parse(s));
        }
    }

    @Test
    void badSpecsNameTheInputAndTheValidForms() {
        for (String bad : List.of("simulated:", "simulated: ", "nvml,,procfs", "nv ml", "auto,nvml", "../x",
                "nvml;rm")) {
            assertThatThrownBy(() -> InventorySpec.parse(bad)).as(bad).isInstanceOf(GpuConfigException.class)
                    .hasMessageContaining("\"" + bad + "\"").hasMessageContaining("simulated:<profile>");
        }
        assertThatThrownBy(() -> InventorySpec.parse(null)).isInstanceOf(GpuConfigException.class);
    }

    @Test
    void aHostSettingNamingAProviderNotOnTheClassPathIsRefusedWhereItIsRead() {
        assertThatThrownBy(() -> InventorySpec.parseKnown("bogus")).isInstanceOf(GpuConfigException.class)
                .hasMessageContaining("\"bogus\"").hasMessageContaining("auto");
        assertThat(InventorySpec.parseKnown("simulated:dgx1-v100").isSimulated()).isTrue();
        assertThat(InventorySpec.parseKnown("auto")).isEqualTo(InventorySpec.AUTO);
    }

    @Test
    void opensWhatItNames() {
        try (GpuInventory inv = InventorySpec.parse("simulated:mi210-8x").open(GpuConfig.defaults())) {
            assertThat(inv.backend()).isEqualTo("simulated:mi210-8x");
            assertThat(inv.devices()).hasSize(8);
        }
        assertThatThrownBy(() -> InventorySpec.parse("no-such-provider").open(GpuConfig.defaults()))
                .isInstanceOf(BackendUnavailableException.class);
    }
}
