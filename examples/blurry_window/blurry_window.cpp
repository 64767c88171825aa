// fsattn-blurry-window: what a Blurry Window Attention (BLA) slot state remembers.
//
// For a few (M, W) settings it feeds one key channel of W tokens through fsattn_bla_forward,
// reads the final slot state back at fractional lags with fsattn_bla_interpolate, checks that
// against the float64 formula  Σ_τ D_M(t−ℓ−τ)/W k_τ  and draws keys and reconstruction into
// one PNG, a panel per setting. Exits non-zero if a check or the PNG write fails.
//
// Usage: fsattn-blurry-window [out.png]   (default blurry_window.png)
#include <fsattn/fsattn.h>
#include <png.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace {

struct Rgb {
  uint8_t r, g, b;
};
constexpr Rgb kPaper{255, 255, 255}, kFrame{190, 190, 190}, kGrid{232, 232, 232}, kZero{150, 150, 150},
    kText{30, 30, 30}, kKey{70, 70, 70}, kLine{31, 100, 200}, kAnchor{230, 120, 20};

// 5x7 glyphs, one string per row, plus an eighth (descender) row for g and y; only the
// characters this program writes.
const std::map<char, std::vector<const char *>> kFont = {
    {'0', {".XXX.", "X...X", "X..XX", "X.X.X", "XX..X", "X...X", ".XXX."}},
    {'1', {"..X..", ".XX..", "..X..", "..X..", "..X..", "..X..", ".XXX."}},
    {'2', {".XXX.", "X...X", "....X", "...X.", "..X..", ".X...", "XXXXX"}},
    {'3', {"XXXXX", "...X.", "..X..", "...X.", "....X", "X...X", ".XXX."}},
    {'4', {"...X.", "..XX.", ".X.X.", "X..X.", "XXXXX", "...X.", "...X."}},
    {'5', {"XXXXX", "X....", "XXXX.", "....X", "....X", "X...X", ".XXX."}},
    {'6', {"..XX.", ".X...", "X....", "XXXX.", "X...X", "X...X", ".XXX."}},
    {'7', {"XXXXX", "....X", "...X.", "..X..", ".X...", ".X...", ".X..."}},
    {'8', {".XXX.", "X...X", "X...X", ".XXX.", "X...X", "X...X", ".XXX."}},
    {'9', {".XXX.", "X...X", "X...X", ".XXXX", "....X", "...X.", ".XX.."}},
    {'=', {".....", ".....", "XXXXX", ".....", "XXXXX", ".....", "....."}},
    {' ', {".....", ".....", ".....", ".....", ".....", ".....", "....."}},
    {'(', {"...X.", "..X..", ".X...", ".X...", ".X...", "..X..", "...X."}},
    {')', {".X...", "..X..", "...X.", "...X.", "...X.", "..X..", ".X..."}},
    {',', {".....", ".....", ".....", ".....", ".XX..", "..X..", ".X..."}},
    {'M', {"X...X", "XX.XX", "X.X.X", "X.X.X", "X...X", "X...X", "X...X"}},
    {'W', {"X...X", "X...X", "X...X", "X.X.X", "X.X.X", "X.X.X", ".X.X."}},
    {'S', {".XXXX", "X....", "X....", ".XXX.", "....X", "....X", "XXXX."}},
    {'a', {".....", ".....", ".XXX.", "....X", ".XXXX", "X...X", ".XXXX"}},
    {'c', {".....", ".....", ".XXX.", "X....", "X....", "X...X", ".XXX."}},
    {'d', {"....X", "....X", ".XX.X", "X..XX", "X...X", "X...X", ".XXXX"}},
    {'e', {".....", ".....", ".XXX.", "X...X", "XXXXX", "X....", ".XXX."}},
    {'g', {".....", ".....", ".XXXX", "X...X", "X...X", ".XXXX", "....X", ".XXX."}},
    {'h', {"X....", "X....", "X.XX.", "XX..X", "X...X", "X...X", "X...X"}},
    {'i', {"..X..", ".....", ".XX..", "..X..", "..X..", "..X..", ".XXX."}},
    {'k', {"X....", "X....", "X..X.", "X.X..", "XX...", "X.X..", "X..X."}},
    {'l', {".XX..", "..X..", "..X..", "..X..", "..X..", "..X..", ".XXX."}},
    {'n', {".....", ".....", "X.XX.", "XX..X", "X...X", "X...X", "X...X"}},
    {'o', {".....", ".....", ".XXX.", "X...X", "X...X", "X...X", ".XXX."}},
    {'r', {".....", ".....", "X.XX.", "XX..X", "X....", "X....", "X...."}},
    {'s', {".....", ".....", ".XXXX", "X....", ".XXX.", "....X", "XXXX."}},
    {'t', {".X...", ".X...", "XXX..", ".X...", ".X...", ".X..X", "..XX."}},
    {'u', {".....", ".....", "X...X", "X...X", "X...X", "X..XX", ".XX.X"}},
    {'w', {".....", ".....", "X...X", "X...X", "X.X.X", "X.X.X", ".X.X."}},
    {'y', {".....", ".....", "X...X", "X...X", "X...X", ".XXXX", "....X", ".XXX."}},
};

class Canvas {
 public:
  Canvas(int w, int h) : w_(w), h_(h), px_(size_t(w) * h * 3, 255) {}
  int width() const { return w_; }
  int height() const { return h_; }
  const uint8_t *row(int y) const { return &px_[size_t(y) * w_ * 3]; }

  void set(int x, int y, Rgb c) {
    if (x < 0 || y < 0 || x >= w_ || y >= h_) return;  // clip silently
    uint8_t *p = &px_[(size_t(y) * w_ + x) * 3];
    p[0] = c.r, p[1] = c.g, p[2] = c.b;
  }
  void rect(int x0, int y0, int x1, int y1, Rgb c) {  // filled, inclusive corners
    for (int y = y0; y <= y1; ++y)
      for (int x = x0; x <= x1; ++x) set(x, y, c);
  }
  // Bresenham; each step stamps a thick x thick square, so diagonals stay as bold as axes.
  void line(int x0, int y0, int x1, int y1, Rgb c, int thick = 2) {
    int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
    int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, err = dx + dy;
    for (;;) {
      rect(x0, y0, x0 + thick - 1, y0 + thick - 1, c);
      if (x0 == x1 && y0 == y1) break;
      int e2 = 2 * err;
      if (e2 >= dy) err += dy, x0 += sx;
      if (e2 <= dx) err += dx, y0 += sy;
    }
  }
  void dot(int cx, int cy, int r, Rgb c) {
    for (int y = -r; y <= r; ++y)
      for (int x = -r; x <= r; ++x)
        if (x * x + y * y <= r * r + r) set(cx + x, cy + y, c);
  }
  // Top-left anchored text; unknown characters draw as a solid block so they are noticed.
  void text(int x, int y, const std::string &s, Rgb c, int scale = 2) {
    for (char ch : s) {
      auto g = kFont.find(ch);
      const int rows = g == kFont.end() ? 7 : int(g->second.size());
      for (int r = 0; r < rows; ++r)
        for (int col = 0; col < 5; ++col)
          if (g == kFont.end() || g->second[r][col] == 'X')
            rect(x + col * scale, y + r * scale, x + (col + 1) * scale - 1, y + (r + 1) * scale - 1, c);
      x += 6 * scale;
    }
  }
  static int text_width(const std::string &s, int scale = 2) { return int(s.size()) * 6 * scale - scale; }

 private:
  int w_, h_;
  std::vector<uint8_t> px_;
};

// Keys k_τ, τ = 0..T−1 (τ = T−1 is the newest token). A sine of period 16 tokens, two steps
// of opposite sign and one spike: each shows a different effect of the low-pass.
std::vector<float> make_keys(int T) {
  std::vector<float> k(T);
  for (int tau = 0; tau < T; ++tau) {
    double v = 0.35 * std::sin(2.0 * M_PI * tau / 16.0);
    if (tau >= T / 8 && tau < 3 * T / 8) v += 1.0;
    if (tau >= 5 * T / 8 && tau < 13 * T / 16) v -= 0.6;
    if (tau == 9 * T / 16) v += 1.5;
    k[tau] = float(v);
  }
  return k;
}

// Dirichlet kernel D_M(x) = 1 + 2 Σ_{m=1..M} cos(2π m x / W), in double.
double dirichlet(int M, double W, double x) {
  double s = 1.0;
  for (int m = 1; m <= M; ++m) s += 2.0 * std::cos(2.0 * M_PI * m * x / W);
  return s;
}

[[noreturn]] void die(const std::string &msg) {
  std::fprintf(stderr, "fsattn-blurry-window: %s\n", msg.c_str());
  std::exit(1);
}

// One BLA forward over the keys (B=H=Dk=Dv=1, γ=1, pos0=0, v=k), then the final key slots
// read back at `lags` behind the newest token: the window the state remembers.
std::vector<float> run_bla(int M, double W, int S, const std::vector<float> &k, const std::vector<double> &lags) {
  const int64_t T = int64_t(k.size());
  const fsattn_exec exec = FSATTN_EXEC_INIT;
  fsattn_dims dims = FSATTN_DIMS_INIT;
  dims.batch = 1, dims.seqlen = T, dims.heads = 1, dims.dk = 1, dims.dv = 1;
  const float log_gamma[1] = {0.0f};  // γ = 1: no decay, the window is all that forgets
  fsattn_bla_params p = FSATTN_BLA_PARAMS_INIT;
  p.modes = M, p.period = W, p.slots = S, p.log_gamma = log_gamma;
  std::vector<float> q(T, 1.0f), o(T), state_k(S), window(lags.size());
  if (fsattn_bla_forward(&exec, &dims, &p, q.data(), k.data(), k.data(), nullptr, nullptr, o.data(), state_k.data(),
                         nullptr) != FSATTN_OK)
    die(std::string("fsattn_bla_forward: ") + fsattn_last_error());
  if (fsattn_bla_interpolate(&exec, 1, 1, 1, M, W, S, T - 1, lags.data(), int64_t(lags.size()), state_k.data(),
                             window.data()) != FSATTN_OK)
    die(std::string("fsattn_bla_interpolate: ") + fsattn_last_error());
  return window;
}

// Σ_τ D_M(t−ℓ−τ)/W k_τ: the blurred key history the slots should hold, at each lag ℓ.
std::vector<double> expected_window(int M, double W, const std::vector<float> &k, const std::vector<double> &lags) {
  const double t = double(k.size() - 1);
  std::vector<double> out;
  for (double lag : lags) {
    double s = 0.0;
    for (size_t tau = 0; tau < k.size(); ++tau) s += dirichlet(M, W, t - lag - double(tau)) / W * k[tau];
    out.push_back(s);
  }
  return out;
}

void write_png(const Canvas &c, const std::string &path) {
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f) die("cannot open " + path + " for writing");
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!png || !info) {
    png_destroy_write_struct(&png, nullptr);
    std::fclose(f);
    die("libpng: out of memory");
  }
  std::vector<png_bytep> rows(c.height());  // built before setjmp: nothing changes after it
  for (int y = 0; y < c.height(); ++y) rows[y] = const_cast<png_bytep>(c.row(y));
  if (setjmp(png_jmpbuf(png))) {  // libpng longjmps here on any error (it printed why)
    png_destroy_write_struct(&png, &info);
    std::fclose(f);
    die("libpng failed writing " + path);
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, c.width(), c.height(), 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  png_write_image(png, rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  if (std::fclose(f) != 0) die("error closing " + path);
}

struct Panel {
  int M, S;
  double W;
  std::vector<float> keys;
  std::vector<double> lags;
  std::vector<float> window;
};

// Plot geometry shared by all panels so their vertical scales can be compared.
constexpr int kImgW = 1200, kImgH = 900, kLeft = 60, kRight = 1180, kTop = 10, kPanelH = 196, kGap = 14, kHeader = 36,
              kFooter = 20;

void draw_panel(Canvas &c, const Panel &p, int top, double vmin, double vmax, bool legend) {
  const int bottom = top + kPanelH, y_hi = top + kHeader, y_lo = bottom - kFooter;
  const int T = int(p.keys.size());
  auto X = [&](double lag) { return kLeft + int(std::lround(lag / (p.W - 1) * (kRight - kLeft))); };
  auto Y = [&](double v) { return y_lo - int(std::lround((v - vmin) / (vmax - vmin) * (y_lo - y_hi))); };

  for (int lag = 0; lag < T; lag += 8) c.line(X(lag), top, X(lag), bottom, kGrid, 1);
  c.line(kLeft, Y(0), kRight, Y(0), kZero, 1);
  c.text(kLeft - 16, Y(0) - 7, "0", kZero);
  for (int x : {kLeft, kRight}) c.line(x, top, x, bottom, kFrame, 1);
  for (int y : {top, bottom}) c.line(kLeft, y, kRight, y, kFrame, 1);

  // Slot j sits at absolute position a_j = jW/S; as a lag from the newest token t that is
  // (t − a_j) mod W. The ticks show how densely the S slots sample the window.
  const double t = T - 1;
  for (int j = 0; j < p.S; ++j) {
    double lag = std::fmod(t - j * p.W / p.S + 2 * p.W, p.W);
    c.line(X(lag), bottom - 12, X(lag), bottom - 1, kAnchor, 2);
  }
  for (size_t i = 1; i < p.lags.size(); ++i)
    c.line(X(p.lags[i - 1]), Y(p.window[i - 1]), X(p.lags[i]), Y(p.window[i]), kLine, 2);
  for (int lag = 0; lag < T; ++lag) c.dot(X(lag), Y(p.keys[T - 1 - lag]), 3, kKey);

  // Labels get a paper-coloured backing so the grid lines do not run through the letters.
  const std::string label =
      "M=" + std::to_string(p.M) + "  W=" + std::to_string(int(p.W)) + "  S=" + std::to_string(p.S);
  c.rect(kLeft + 2, top + 2, kLeft + 18 + Canvas::text_width(label), top + 28, kPaper);
  c.text(kLeft + 10, top + 8, label, kText);
  if (!legend) return;
  int x = kRight - 560, y = top + 8;
  c.rect(x - 8, top + 2, kRight - 2, top + 28, kPaper);
  c.dot(x + 6, y + 7, 3, kKey);
  c.text(x + 18, y, "keys", kText);
  x += 90;
  c.line(x, y + 6, x + 30, y + 6, kLine, 2);
  c.text(x + 40, y, "reconstructed window", kText);
  x += 300;
  c.line(x + 4, y, x + 4, y + 12, kAnchor, 2);
  c.text(x + 16, y, "slot anchors", kText);
}

}  // namespace

int main(int argc, char **argv) {
  std::string path = "blurry_window.png";
  CLI::App app{"fsattn-blurry-window: draws what a BLA slot state remembers, checked against float64"};
  app.add_option("out", path, "the PNG to write")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e) == 0 ? 0 : 2;  // app.exit prints the help or the error
  }
  const std::vector<std::pair<int, double>> settings = {{2, 64}, {6, 64}, {16, 64}, {31, 64}};

  std::vector<Panel> panels;
  bool ok = true;
  for (auto [M, W] : settings) {
    Panel p{M, 2 * M + 1, W, make_keys(int(W)), {}, {}};  // S = 2M+1: exact interpolation
    for (int i = 0; i <= 4 * (int(W) - 1); ++i) p.lags.push_back(0.25 * i);
    p.window = run_bla(M, W, p.S, p.keys, p.lags);
    std::vector<double> want = expected_window(M, W, p.keys, p.lags);
    double err = 0.0, scale = 0.0;
    for (size_t i = 0; i < want.size(); ++i) {
      err = std::max(err, std::abs(double(p.window[i]) - want[i]));
      scale = std::max(scale, std::abs(want[i]));
    }
    const bool pass = err <= 1e-4 * scale;
    ok &= pass;
    std::printf("M=%-2d W=%g S=%-2d  max abs error %.2e  (max |value| %.3f)  %s  -> %s\n", M, W, p.S, err, scale,
                pass ? "ok" : "FAILED", path.c_str());
    panels.push_back(std::move(p));
  }
  if (!ok) die("reconstruction does not match the float64 formula (tolerance 1e-4 x max |value|)");

  double vmin = 0.0, vmax = 0.0;
  for (const Panel &p : panels) {
    for (float v : p.keys) vmin = std::min(vmin, double(v)), vmax = std::max(vmax, double(v));
    for (float v : p.window) vmin = std::min(vmin, double(v)), vmax = std::max(vmax, double(v));
  }
  const double pad = 0.05 * (vmax - vmin);
  vmin -= pad, vmax += pad;

  Canvas canvas(kImgW, kImgH);
  for (size_t i = 0; i < panels.size(); ++i)
    draw_panel(canvas, panels[i], kTop + int(i) * (kPanelH + kGap), vmin, vmax, i == 0);

  // Shared lag axis under the last panel: newest token on the left.
  const int axis_y = kTop + int(panels.size()) * (kPanelH + kGap) - kGap + 6;
  const double W = panels.back().W;
  for (int lag : {0, 16, 32, 48, 63}) {
    int x = kLeft + int(std::lround(lag / (W - 1) * (kRight - kLeft)));
    std::string s = std::to_string(lag);
    canvas.text(std::clamp(x - Canvas::text_width(s) / 2, 0, kImgW - Canvas::text_width(s)), axis_y, s, kText);
  }
  const std::string axis = "lag (tokens, 0 = newest)";
  canvas.text((kLeft + kRight - Canvas::text_width(axis)) / 2, axis_y + 22, axis, kText);

  write_png(canvas, path);
  std::printf("wrote %s\n", path.c_str());
  return 0;
}
