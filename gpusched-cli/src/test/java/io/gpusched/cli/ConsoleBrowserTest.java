package io.gpusched.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.server.ConsoleServer;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.openqa.selenium.By;
import org.openqa.selenium.Dimension;
import org.openqa.selenium.OutputType;
import org.openqa.selenium.StaleElementReferenceException;
import org.openqa.selenium.chrome.ChromeDriver;
import org.openqa.selenium.chrome.ChromeDriverService;
import org.openqa.selenium.chrome.ChromeOptions;
import org.openqa.selenium.support.ui.WebDriverWait;

/**
 * The console page in a real headless Chromium (Debian's chromium and chromedriver, driven by Selenium): it shows
 * the simulated DGX-1's 8 GPUs; an allocation made by the CLI in another process appears with no reload; a health
 * change shows; a screenshot is written to target/console-screenshot.png. A freshly opened page draws sparklines from
 * points sampled before it was opened (the server's history). Hostile owner, job, labels, health reason and device
 * name render as text: no element they spell exists in the DOM and no flag their scripts would set is set.
 *
 * <p>The tests share one browser (each opens its own console, a new origin, on a page it loads itself; each ends on
 * {@code about:blank}, so no page of one test is open in the next); a test that cannot leave its page so ends the
 * browser and the next starts its own. Waits poll every {@link #POLL}.
 */
class ConsoleBrowserTest {
    static final Path CHROMIUM = Path.of("/usr/bin/chromium");
    static final Path CHROMEDRIVER = Path.of("/usr/bin/chromedriver");
    /** How often a wait checks the page again (Selenium's default is 500 ms). */
    static final Duration POLL = Duration.ofMillis(50);

    @TempDir
    static Path browserDir;
    private static ChromeDriver shared;

    /** @return the class's browser (started on first use) at the window size every test starts with */
    private static ChromeDriver sharedBrowser() throws java.io.IOException {
        if (shared == null) {
            shared = browser(browserDir);
        }
        shared.manage().window().setSize(new Dimension(1280, 1800));
        return shared;
    }

    /** Leaves the test's page (its event stream closes before its console does); a browser that cannot is ended. */
    private static void leavePage() {
        try {
            shared.get("about:blank");
        } catch (RuntimeException e) {
            shared.quit();
            shared = null;
        }
    }

    @AfterAll
    static void quitBrowser() {
        if (shared != null) {
            shared.quit();
            shared = null;
        }
    }

    static ChromeDriver browser(Path dir) throws java.io.IOException {
        ChromeOptions options = new ChromeOptions();
        options.setBinary(CHROMIUM.toFile());
        options.addArguments("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--window-size=1280,1800",
                "--user-data-dir=" + Files.createDirectories(dir.resolve("chromium-profile")));
        ChromeDriverService service = new ChromeDriverService.Builder()
                .usingDriverExecutable(CHROMEDRIVER.toFile()).usingAnyFreePort().build();
        return new ChromeDriver(service, options);
    }

    /** @return how many points /api/v1/samples holds for GPU 0 (read over HTTP, as any client would) */
    static int samplesOfGpu0(ConsoleServer console) throws Exception {
        var r = java.net.http.HttpClient.newHttpClient().send(java.net.http.HttpRequest.newBuilder(
                java.net.URI.create(console.url() + "/api/v1/samples?gpu=0")).build(),
                java.net.http.HttpResponse.BodyHandlers.ofString());
        var pts = new com.fasterxml.jackson.databind.ObjectMapper().readTree(r.body()).get("0");
        return pts == null ? 0 : pts.size();
    }

    @Test
    @SuppressWarnings("unchecked")
    void hostileTextRendersAsText(@TempDir Path dir) throws Exception {
        assumeTrue(Files.isExecutable(CHROMIUM) && Files.isExecutable(CHROMEDRIVER),
                "skipped: needs Debian's chromium and chromium-driver (.ci/install-test-deps installs them)");
        String deviceName =
                "<img src=x onerror=\"window.__xss='name'\"><script>window.__xss='name2'</script><b>GPU</b>";
        String owner = "<img src=x onerror=\"window.__xss='owner'\">";
        String job = "<script>window.__xss='job'</script>";
        String label = "<svg onload=\"window.__xss='label'\"></svg><iframe src=\"javascript:window.__xss=1\">";
        String reason = "<img src=x onerror=\"window.__xss='health'\"> XID 79";
        Path node = Files.writeString(dir.resolve("node.yaml"), "node: hostile\ndriver_version: \"535.1\"\n"
                + "defaults: {vendor: NVIDIA, memory: 16GiB, name: \"" + deviceName.replace("\\", "\\\\")
                        .replace("\"", "\\\"")
                + "\"}\ndevices:\n  - {index: 0, pci_bus_id: \"00000000:10:00.0\"}\n"
                + "  - {index: 1, pci_bus_id: \"00000000:11:00.0\"}\n");
        SimulatedGpuInventory inventory = GpuInventories.simulated(node.toString());
        assertThat(inventory.devices().get(0).name()).isEqualTo(deviceName);
        try (GpuScheduler scheduler = GpuScheduler.builder().inventory(inventory).auditLogging(false).build();
             ConsoleServer console = ConsoleServer.builder().scheduler(scheduler).inventory(inventory)
                     .stateDir(Files.createDirectories(dir.resolve("state")))
                     .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0))
                     .sampleInterval(Duration.ofMillis(500)).build().start()) {
            String id = scheduler.allocate(io.gpusched.core.GpuRequests.fromCliFlags("--gpu=1", "--owner=" + owner,
                    "--job=" + job, "--label=k=" + label)).id();
            inventory.setHealth(1, GpuHealth.unhealthy(reason));
            ChromeDriver browser = sharedBrowser();
            try {
                org.openqa.selenium.support.ui.FluentWait<org.openqa.selenium.WebDriver> wait =
                        new WebDriverWait(browser, Duration.ofSeconds(20), POLL)
                                .ignoring(org.openqa.selenium.StaleElementReferenceException.class);
                browser.get(console.url() + "/");
                wait.until(b -> b.findElements(By.cssSelector("#cards article.card")).size() == 2);
                wait.until(b -> !b.findElements(By.cssSelector("#alloc-rows tr[data-allocation='" + id + "']"))
                        .isEmpty());
                wait.until(b -> b.findElement(By.cssSelector("#gpu-1 [data-role=health]")).getText()
                        .contains("XID 79"));
                wait.until(b -> !b.findElements(By.cssSelector("#audit-list li")).isEmpty());
                // the text is there, as text
                wait.until(b -> b.findElement(By.cssSelector("#gpu-0 .name")).getText().equals(deviceName));
                // the rows are drawn anew on every change: read the row where a redraw cannot pull it away
                String row = wait.until(b -> b.findElement(By.cssSelector("#alloc-rows tr[data-allocation='" + id
                        + "']")).getText());
                assertThat(row).contains(owner).contains(job).contains("k=" + label);
                // cards are drawn anew on every tick: read the health line where a redraw cannot pull it away
                wait.until(b -> b.findElement(By.cssSelector("#gpu-1 [data-role=health]")).getText()
                        .contains(reason));
                assertThat(browser.findElement(By.id("audit-list")).getText()).contains(owner);
                // and nothing it spells exists: no img, svg element other than sparklines, iframe, b, or script
                // beyond the page's own
                Object injected = browser.executeScript("return {"
                        + "img: document.querySelectorAll('img').length,"
                        + "iframe: document.querySelectorAll('iframe').length,"
                        + "b: document.querySelectorAll('main b:not(.holder b)').length,"
                        + "svgOnload: document.querySelectorAll('svg[onload], [onerror]').length,"
                        + "scripts: Array.from(document.scripts).map(s => s.getAttribute('src')).join(','),"
                        + "flag: typeof window.__xss};");
                assertThat((java.util.Map<String, Object>) injected)
                        .as("elements and flags the payloads would have made")
                        .containsEntry("img", 0L).containsEntry("iframe", 0L).containsEntry("b", 0L)
                        .containsEntry("svgOnload", 0L).containsEntry("scripts", "/app.js,/usage.js")
                        .containsEntry("flag", "undefined");
                Files.createDirectories(Path.of("target"));
                Files.write(Path.of("target", "console-screenshot-hostile.png"),
                        browser.getScreenshotAs(OutputType.BYTES));
            } finally {
                leavePage();
            }
        }
    }

    @Test
    void thePageShowsTheNodeLiveWithAllocationsFromOtherProcesses(@TempDir Path dir) throws Exception {
        assumeTrue(Files.isExecutable(CHROMIUM) && Files.isExecutable(CHROMEDRIVER),
                "skipped: needs Debian's chromium and chromium-driver (.ci/install-test-deps installs them)");
        Path state = dir.resolve("state");
        Path ledger = Files.createDirectories(state); // the CLI child below uses --state-dir state: one ledger
        SimulatedGpuInventory inventory = GpuInventories.simulated("dgx1-v100");
        try (GpuScheduler scheduler = GpuScheduler.builder().inventory(inventory).stateDir(ledger)
                .auditLogging(false).build();
             ConsoleServer console = ConsoleServer.builder().scheduler(scheduler).inventory(inventory).stateDir(state)
                     .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).refresh(scheduler::refresh)
                     .sampleInterval(Duration.ofMillis(500)).build().start()) {
            // the page is opened only once the server holds a few samples: its sparklines must start with them
            while (samplesOfGpu0(console) < 3) {
                Thread.sleep(50);
            }
            long opened = System.currentTimeMillis();
            ChromeDriver browser = sharedBrowser();
            try {
                // the page re-renders cards on every pushed sample, so an element found may be replaced before it is
                // read: checks retry on a stale element rather than fail
                org.openqa.selenium.support.ui.FluentWait<org.openqa.selenium.WebDriver> wait =
                        new WebDriverWait(browser, Duration.ofSeconds(20), POLL)
                                .ignoring(org.openqa.selenium.StaleElementReferenceException.class);
                browser.get(console.url() + "/");
                wait.until(b -> b.findElements(By.cssSelector("#cards article.card")).size() == 8);
                wait.until(b -> b.findElements(By.cssSelector("#cards article.card")).stream()
                        .allMatch(c -> c.getText().contains("Tesla V100-SXM2-32GB") && c.getText().contains("GiB")));
                wait.until(b -> b.findElement(By.id("live")).getText().equals("live"));
                // sparklines of a page just opened hold points sampled before it was opened
                for (String metric : new String[]{"util", "memUsed", "temp", "power"}) {
                    wait.until(b -> {
                        var svg = b.findElement(By.cssSelector("#gpu-0 svg[data-metric=" + metric + "]"));
                        String from = svg.getAttribute("data-from");
                        return from != null && Long.parseLong(from) < opened
                                && Integer.parseInt(svg.getAttribute("data-points")) >= 3
                                && !svg.findElements(By.tagName("polyline")).isEmpty();
                    });
                }
                assertThat(browser.findElements(By.cssSelector("#topo td.l-NV1")).size()).isGreaterThan(0);

                // another process allocates through the CLI; the page must show it without a reload
                Object marker = browser.executeScript("window.__noReload = 42; return window.__noReload;");
                ChildCli.Result r = ChildCli.run(state, "--simulate", "dgx1-v100", "allocate", "--gpu=2",
                        "--owner=carol", "--lease=2h");
                assertThat(r.exit()).as(r.out()).isZero();
                Matcher m = Pattern.compile("allocated (\\S+): GPUs").matcher(r.out());
                assertThat(m.find()).as(r.out()).isTrue();
                String id = m.group(1);
                new WebDriverWait(browser, Duration.ofSeconds(2), POLL).until(b -> !b.findElements(
                        By.cssSelector("#alloc-rows tr[data-allocation='" + id + "']")).isEmpty());
                new WebDriverWait(browser, Duration.ofSeconds(2), POLL).until(b -> b.findElements(
                        By.cssSelector(".holder[data-allocation='" + id + "']")).size() == 2);
                // read in one wait: the live page may render the row again between a find and a read (stale)
                String row = new WebDriverWait(browser, Duration.ofSeconds(10), POLL).ignoring(
                        StaleElementReferenceException.class).until(
                                b -> b.findElement(By.cssSelector(
                                        "#alloc-rows tr[data-allocation='" + id + "']")).getText());
                assertThat(row).contains("carol").contains("detached").containsPattern("1h 59m|2h 0m");
                assertThat(browser.executeScript("return window.__noReload;")).isEqualTo(marker);

                // a health change on GPU 5
                inventory.setHealth(5, GpuHealth.unhealthy("XID 79: GPU has fallen off the bus"));
                wait.until(b -> b.findElement(By.cssSelector("#gpu-5 [data-role=health]")).getText()
                        .contains("UNHEALTHY: XID 79"));
                wait.until(b -> b.findElement(By.id("gpu-5")).getAttribute("class").contains("unhealthy"));
                wait.until(b -> !b.findElements(By.cssSelector("#doctor-body h3")).isEmpty());

                // released by another process: a delta removes it from the table and from both cards
                ChildCli.Result rel = ChildCli.run(state, "--simulate", "dgx1-v100", "release", id);
                assertThat(rel.exit()).as(rel.out()).isZero();
                wait.until(b -> b.findElements(By.cssSelector("#alloc-rows tr[data-allocation='" + id + "']"))
                        .isEmpty());
                wait.until(b -> b.findElements(By.cssSelector(".holder[data-allocation='" + id + "']")).isEmpty());
                assertThat(browser.executeScript("return window.__noReload;")).isEqualTo(marker);

                Path shot = Path.of("target", "console-screenshot.png");
                Files.createDirectories(shot.getParent());
                Files.write(shot, browser.getScreenshotAs(OutputType.BYTES));
                browser.manage().window().setSize(new Dimension(390, 1600));
                Files.write(Path.of("target", "console-screenshot-phone.png"),
                        browser.getScreenshotAs(OutputType.BYTES));
                assertThat(Files.size(shot)).isGreaterThan(10_000);
            } finally {
                leavePage();
            }
        }
    }

    /**
     * A node whose allocations are over the state event's bound: the event carries the first of them and a
     * {@code truncated} marker, and the page reads the rest from the REST pages it names: it lists every allocation.
     */
    @Test
    void aTruncatedStateIsCompletedFromTheRestPages(@TempDir Path dir) throws Exception {
        assumeTrue(Files.isExecutable(CHROMIUM) && Files.isExecutable(CHROMEDRIVER),
                "skipped: needs Debian's chromium and chromium-driver (.ci/install-test-deps installs them)");
        SimulatedGpuInventory inventory = GpuInventories.simulated("dgx1-v100");
        String wide = new String(Character.toChars(0x1F600)).repeat(200);
        try (GpuScheduler scheduler = GpuScheduler.builder().inventory(inventory).auditLogging(false).build();
             ConsoleServer console = ConsoleServer.builder().scheduler(scheduler).inventory(inventory)
                     .stateDir(Files.createDirectories(dir.resolve("state")))
                     .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build().start()) {
            java.util.List<String> ids = new java.util.ArrayList<>();
            for (int n = 0; n < 80; n++) { // ~8.5 KB each: the state event and more than one REST page
                java.util.List<String> f = new java.util.ArrayList<>(java.util.List.of("--devices=" + (n % 8),
                        "--shared=32MiB", "--owner=u" + n));
                for (int l = 0; l < 32; l++) {
                    f.add("--label=k" + l + "=" + wide);
                }
                ids.add(scheduler.allocate(io.gpusched.core.GpuRequests.fromCliFlags(f)).id());
            }
            var first = java.net.http.HttpClient.newHttpClient().send(java.net.http.HttpRequest.newBuilder(
                    java.net.URI.create(console.url() + "/api/v1/allocations")).build(),
                    java.net.http.HttpResponse.BodyHandlers.discarding());
            assertThat(first.headers().firstValue("Link")).as("precondition: the list needs more than one page")
                    .isPresent();
            ChromeDriver browser = sharedBrowser();
            try {
                org.openqa.selenium.support.ui.FluentWait<org.openqa.selenium.WebDriver> wait =
                        new WebDriverWait(browser, Duration.ofSeconds(20), POLL)
                                .ignoring(org.openqa.selenium.StaleElementReferenceException.class);
                browser.get(console.url() + "/");
                wait.until(b -> b.findElement(By.id("live")).getText().equals("live"));
                // the state event as the page's own stream gets it, read to its end
                Object sent = browser.executeScript("return (async () => {"
                        + " const rd = (await fetch('/api/v1/events')).body.getReader();"
                        + " const dec = new TextDecoder(); let t = '';"
                        + " while (!/event: state\\ndata: [^\\n]*\\n\\n/.test(t)) {"
                        + "   const x = await rd.read(); if (x.done) break; t += dec.decode(x.value, {stream: true}); }"
                        + " rd.cancel(); return t; })()");
                assertThat(String.valueOf(sent)).as("the state event is truncated").contains("STATE_EVENT_BOUND");
                wait.until(b -> b.findElements(By.cssSelector("#alloc-rows tr[data-allocation]")).size() == 80);
                assertThat(browser.findElement(By.id("alloc-count")).getText()).isEqualTo("(80)");
                for (String id : ids) {
                    assertThat(browser.findElements(By.cssSelector("#alloc-rows tr[data-allocation='" + id + "']")))
                            .as(id).hasSize(1);
                }
            } finally {
                leavePage();
            }
        }
    }
}
