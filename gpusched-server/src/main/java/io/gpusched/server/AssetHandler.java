package io.gpusched.server;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpHandler;
import java.io.IOException;
import java.io.InputStream;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Serves fixed files from the jar's {@code web/} folder: the page ({@code index.html} with its Content-Security-Policy,
 * script, style, icon) or the API's OpenAPI document. Only the paths it was built with are served; nothing is resolved
 * from the request's path.
 */
final class AssetHandler implements HttpHandler {
    private record Asset(String name, String type) {
    }

    private final Map<String, Asset> assets = new LinkedHashMap<>();

    /** @return the page's own files (not part of the API document) */
    static AssetHandler page() {
        AssetHandler h = new AssetHandler();
        h.assets.put("/", new Asset("index.html", "text/html; charset=utf-8"));
        h.assets.put("/index.html", new Asset("index.html", "text/html; charset=utf-8"));
        h.assets.put("/app.js", new Asset("app.js", "text/javascript; charset=utf-8"));
        h.assets.put("/usage.js", new Asset("usage.js", "text/javascript; charset=utf-8"));
        h.assets.put("/app.css", new Asset("app.css", "text/css; charset=utf-8"));
        h.assets.put("/favicon.svg", new Asset("favicon.svg", "image/svg+xml"));
        return h;
    }

    /** @return the OpenAPI document at {@code path} */
    static AssetHandler openApi(String path) {
        AssetHandler h = new AssetHandler();
        h.assets.put(path, new Asset("openapi.json", "application/json"));
        return h;
    }

    /** @return the paths served, in order */
    Iterable<String> paths() {
        return assets.keySet();
    }

    @Override
    public void handle(HttpExchange ex) throws IOException {
        Asset asset = assets.get(ex.getRequestURI().getRawPath());
        if (asset == null) {
            Exchanges.error(ex, 404, "no such resource: " + ex.getRequestURI().getRawPath(), null);
            return;
        }
        Exchanges.get(ex, () -> {
            try (InputStream in = AssetHandler.class.getResourceAsStream("web/" + asset.name())) {
                if (in == null) {
                    Exchanges.error(ex, 404, "missing asset " + asset.name(), null);
                    return;
                }
                byte[] bytes = in.readAllBytes();
                ex.getResponseHeaders().set("Content-Type", asset.type());
                ex.getResponseHeaders().set("Cache-Control", "no-cache");
                if (asset.name().equals("index.html")) {
                    ex.getResponseHeaders().set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:;"
                            + " style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'");
                }
                Exchanges.send(ex, 200, bytes);
            }
        });
    }
}
