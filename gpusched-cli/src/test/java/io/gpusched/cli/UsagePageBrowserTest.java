package io.gpusched.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.RecordCodec;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.server.ConsoleServer;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.openqa.selenium.By;
import org.openqa.selenium.OutputType;
import org.openqa.selenium.WebElement;
import org.openqa.selenium.chrome.ChromeDriver;
import org.openqa.selenium.support.ui.WebDriverWait;

/**
 * The console's usage page in a real headless Chromium, over the store the demo fills: a row and a bar per owner and
 * per day, with the figures the REST API gives, and an owner's name that is markup shown as text.
 */
class UsagePageBrowserTest {

    @Test
    @SuppressWarnings("unchecked")
    void theUsagePageShowsOwnersAndDaysFromTheStore(@TempDir Path dir) throws Exception {
        assumeTrue(Files.isExecutable(ConsoleBrowserTest.CHROMIUM) && Files.isExecutable(
                ConsoleBrowserTest.CHROMEDRIVER), "skipped: needs Debian's chromium and chromium-driver"
                        + " (.ci/install-test-deps installs them)");
        Path state = Files.createDirectories(dir.resolve("state"));
        CliRunner cli = new CliRunner(state);
        assertThat(cli.run("--simulate", "dgx1-v100", "demo").exit()).isZero();
        String hostile = "<img src=x onerror=window.__xss=1>";
        // one more allocation, by an owner whose name is markup, as a record of the store
        String json = "{\"k\":\"i\",\"id\":\"x-1\",\"owner\":" + new ObjectMapper().writeValueAsString(hostile)
                + ",\"from\":" + (System.currentTimeMillis() - 600_000) + ",\"to\":" + (System.currentTimeMillis()
                        - 540_000)
                + ",\"first\":true,\"end\":\"RELEASED\",\"gpus\":[{\"i\":0,\"uuid\":\"GPU-0\","
                + "\"held\":60000,\"meas\":60000,\"um\":60000,\"us\":3000000.0,\"up\":50.0,\"idle\":0,\"e\":0,"
                + "\"ee\":0,\"em\":0}]}";
        CRC32C crc = new CRC32C();
        byte[] bytes = json.getBytes(StandardCharsets.UTF_8);
        crc.update(bytes, 0, bytes.length);
        try (AccountingStore.Writer w = AccountingStore.at(state).openWriter().orElseThrow()) {
            w.append(List.of(RecordCodec.decode(String.format("%08x", crc.getValue()) + " " + json)));
        }
        SimulatedGpuInventory inventory = GpuInventories.simulated("dgx1-v100");
        try (GpuScheduler scheduler = GpuScheduler.builder().inventory(inventory).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
             ConsoleServer console = ConsoleServer.builder().scheduler(scheduler).inventory(inventory).stateDir(state)
                     .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build().start()) {
            var api = new ObjectMapper().readTree(java.net.http.HttpClient.newHttpClient().send(
                    java.net.http.HttpRequest.newBuilder(java.net.URI.create(console.url()
                            + "/api/v1/usage?by=owner&since=7d")).build(),
                    java.net.http.HttpResponse.BodyHandlers.ofString()).body());
            ChromeDriver browser = ConsoleBrowserTest.browser(dir);
            try {
                WebDriverWait wait = new WebDriverWait(browser, Duration.ofSeconds(20));
                browser.get(console.url() + "/#usage");
                wait.until(b -> b.findElements(By.cssSelector("#usage-owners tbody tr[data-key]")).size() == api
                        .get("rows").size());
                List<WebElement> rows = browser.findElements(By.cssSelector("#usage-owners tbody tr[data-key]"));
                assertThat(rows).extracting(r -> r.getAttribute("data-key")).contains("alice", "bob", "carol",
                        "dave", "erin", hostile);
                assertThat(browser.findElement(By.id("usage-owners")).getText()).contains(hostile);
                WebElement carol = browser.findElement(By.cssSelector("#usage-owners tr[data-key=carol]"));
                assertThat(carol.getText()).contains("idle").contains("100 %").contains("1.00");
                assertThat(browser.findElements(By.cssSelector("#usage-owners svg.bars rect.busy")))
                        .hasSize(api.get("rows").size());
                wait.until(b -> !b.findElements(By.cssSelector("#usage-days tbody tr[data-key]")).isEmpty());
                assertThat(browser.findElement(By.id("usage-owners")).getText()).contains("Total: 6 allocations");
                Files.createDirectories(Path.of("target"));
                Files.write(Path.of("target", "console-usage.png"), browser.findElement(
                        By.id("usage")).getScreenshotAs(OutputType.BYTES));
                Map<String, Object> injected = (Map<String, Object>) browser.executeScript("return {img:"
                        + " document.querySelectorAll('img').length, flag: typeof window.__xss};");
                assertThat(injected).containsEntry("img", 0L).containsEntry("flag", "undefined");
            } finally {
                browser.quit();
            }
        }
    }
}
