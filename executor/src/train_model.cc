// The trainer's model (train_internal.h): forward and hand-written backward of a small
// decoder-only transformer on this rank's tp slice, Megatron style. The residual stream is
// replicated over tp; a row-parallel output (attention projection, W2) is all-reduced in
// the forward pass, the input gradient of a column-parallel layer (QKV, W1) in the
// backward pass, so every replicated parameter (gains, embedding, head) gets the same
// gradient on every tp rank.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "train_internal.h"

namespace stepcast::exec::train {

namespace {

using Vec = Eigen::VectorXf;
using Arr = Eigen::Array<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
constexpr float kNormEps = 1e-5f;

// Indices into Model::params_: the embedding, six per layer, the final norm, the head.
enum LayerParam { kNorm1 = 0, kQkv, kOut, kNorm2, kW1, kW2, kPerLayer };
std::size_t layer_param(int layer, LayerParam which) { return 1 + static_cast<std::size_t>(layer) * kPerLayer + which; }

// y = x / rms(x) * gain, row by row; r = 1 / rms.
void rms_forward(const Mat& x, const Mat& gain, Mat& y, Vec& r) {
  const float inv_h = 1.0f / static_cast<float>(x.cols());
  r = ((x.array().square().rowwise().sum() * inv_h) + kNormEps).rsqrt();
  y = (x.array().colwise() * r.array()).rowwise() * gain.row(0).array();
}

// Adds the input gradient to dx and the gain's gradient to dgain.
void rms_backward(const Mat& x, const Vec& r, const Mat& gain, const Mat& dy, Mat& dx, Mat& dgain) {
  const float inv_h = 1.0f / static_cast<float>(x.cols());
  const Mat gdy = dy.array().rowwise() * gain.row(0).array();
  dgain += ((dy.array() * x.array()).colwise() * r.array()).colwise().sum().matrix();
  const Vec dot = (gdy.array() * x.array()).rowwise().sum();
  const Vec coef = r.array().cube() * dot.array() * inv_h;
  dx.array() += (gdy.array().colwise() * r.array()) - (x.array().colwise() * coef.array());
}

// GELU, tanh approximation, and its derivative.
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;
Mat gelu(const Mat& a) {
  const Arr t = (kGeluC * (a.array() + kGeluA * a.array().cube())).tanh();
  return (0.5f * a.array() * (1.0f + t)).matrix();
}
Mat gelu_grad(const Mat& a) {
  const Arr t = (kGeluC * (a.array() + kGeluA * a.array().cube())).tanh();
  const Arr dt = kGeluC * (1.0f + 3.0f * kGeluA * a.array().square());
  return (0.5f * (1.0f + t) + 0.5f * a.array() * (1.0f - t.square()) * dt).matrix();
}

// Causal softmax of one head's scores in place: row i keeps columns 0..i.
void causal_softmax(Mat& p) {
  for (Eigen::Index i = 0; i < p.rows(); ++i) {
    auto row = p.row(i).head(i + 1).array();
    row = (row - row.maxCoeff()).exp();
    row /= row.sum();
    p.row(i).tail(p.cols() - i - 1).setZero();
  }
}

// Activations one layer keeps for its backward pass.
struct LayerCache {
  Mat x, n1, qkv, attn, x2, n2, a, h;  // h: the dropped GELU output (W2's input)
  Mat keep;                            // dropout scale (0 or 1 / (1 - p)); empty: no dropout
  Vec r1, r2;
  std::vector<Mat> probs;  // per (sequence, local head): seq x seq
};

void attention_forward(LayerCache& L, const AttnShape& a) {
  L.attn.resize(a.seqs * a.s_len, a.heads * a.hd);
  L.probs.resize(static_cast<std::size_t>(a.seqs * a.heads));
  for (Eigen::Index b = 0; b < a.seqs; ++b) {
    for (Eigen::Index h = 0; h < a.heads; ++h) {
      const Eigen::Index r0 = b * a.s_len, c0 = h * 3 * a.hd;  // [q k v] of head h
      const auto q = L.qkv.block(r0, c0, a.s_len, a.hd);
      const auto k = L.qkv.block(r0, c0 + a.hd, a.s_len, a.hd);
      const auto v = L.qkv.block(r0, c0 + 2 * a.hd, a.s_len, a.hd);
      Mat& p = L.probs[static_cast<std::size_t>(b * a.heads + h)];
      p.noalias() = (q * k.transpose()) * a.scale();
      causal_softmax(p);
      L.attn.block(r0, h * a.hd, a.s_len, a.hd).noalias() = p * v;
    }
  }
}

// The gradient of the qkv activations from that of the attention output.
Mat attention_backward(const LayerCache& L, const Mat& dattn, const AttnShape& a) {
  Mat dqkv(L.qkv.rows(), L.qkv.cols());
  for (Eigen::Index b = 0; b < a.seqs; ++b) {
    for (Eigen::Index h = 0; h < a.heads; ++h) {
      const Eigen::Index r0 = b * a.s_len, c0 = h * 3 * a.hd;
      const auto q = L.qkv.block(r0, c0, a.s_len, a.hd);
      const auto k = L.qkv.block(r0, c0 + a.hd, a.s_len, a.hd);
      const auto v = L.qkv.block(r0, c0 + 2 * a.hd, a.s_len, a.hd);
      const auto d_o = dattn.block(r0, h * a.hd, a.s_len, a.hd);
      const Mat& p = L.probs[static_cast<std::size_t>(b * a.heads + h)];
      const Mat dp = d_o * v.transpose();
      // Softmax backward: ds = p * (dp - rowsum(p * dp)); zero where p is masked.
      const Vec rs = (p.array() * dp.array()).rowwise().sum();
      const Mat ds = (p.array() * (dp.array().colwise() - rs.array())).matrix() * a.scale();
      dqkv.block(r0, c0, a.s_len, a.hd).noalias() = ds * k;
      dqkv.block(r0, c0 + a.hd, a.s_len, a.hd).noalias() = ds.transpose() * q;
      dqkv.block(r0, c0 + 2 * a.hd, a.s_len, a.hd).noalias() = p.transpose() * d_o;
    }
  }
  return dqkv;
}

// L.keep for layer `layer`: columns are this rank's slice of the ffn, from global col0.
void dropout_mask(LayerCache& L, const Microbatch& mb, const DropoutKey& drop, int layer, std::int64_t col0,
                  Eigen::Index s_len) {
  L.keep.resize(L.a.rows(), L.a.cols());
  const float kept = 1.0f / (1.0f - drop.p);
  for (Eigen::Index i = 0; i < L.keep.rows(); ++i) {
    const std::uint64_t row = hash_of(drop.seed, drop.counter, static_cast<std::uint64_t>(layer),
                                      static_cast<std::uint64_t>(mb.ids[static_cast<std::size_t>(i / s_len)]),
                                      static_cast<std::uint64_t>(i % s_len));
    for (Eigen::Index j = 0; j < L.keep.cols(); ++j) {
      L.keep(i, j) = unit_float(hash_of(row, static_cast<std::uint64_t>(col0 + j))) < drop.p ? 0.0f : kept;
    }
  }
}

// Summed cross-entropy of next-token prediction; `logits` becomes softmax - onehot (the
// gradient of the sum).
double cross_entropy(Mat& logits, const Microbatch& mb, Eigen::Index s_len) {
  double sum = 0;
  for (Eigen::Index i = 0; i < logits.rows(); ++i) {
    auto row = logits.row(i).array();
    const int target = mb.tokens[static_cast<std::size_t>(i / s_len)][static_cast<std::size_t>(i % s_len + 1)];
    const float m = row.maxCoeff();
    const float logit = row(target);
    row = (row - m).exp();
    const float total = row.sum();
    sum += std::log(static_cast<double>(total)) + static_cast<double>(m) - static_cast<double>(logit);
    row /= total;
    row(target) -= 1.0f;
  }
  return sum;
}

}  // namespace

struct Model::Cache {
  std::vector<LayerCache> layers;
  Mat xf, nf, dlogits;
  Vec rf;
};

Model::Model(const TrainConfig& config, Comms& comms) : cfg_(config), comms_(comms), cache_(std::make_unique<Cache>()) {
  const std::int64_t h = cfg_.hidden, f = cfg_.ffn, v = cfg_.vocab;
  const int tp = comms_.tp(), t = comms_.tp_index();
  const std::int64_t hl = h / tp, fl = f / tp;  // local attention width (whole heads), ffn
  auto add = [&](std::string name, std::int64_t rows, std::int64_t cols, std::int64_t row0, std::int64_t col0,
                 std::int64_t lrows, std::int64_t lcols, bool sharded, bool decay) {
    Param p;
    p.name = std::move(name);
    p.global_rows = rows;
    p.global_cols = cols;
    p.row0 = row0;
    p.col0 = col0;
    p.sharded = sharded;
    p.decay = decay;
    p.w = Mat::Zero(lrows, lcols);
    p.g = Mat::Zero(lrows, lcols);
    params_.push_back(std::move(p));
  };
  add("w.embed", v, h, 0, 0, v, h, false, true);
  for (int l = 0; l < cfg_.layers; ++l) {
    const std::string pre = "w.layer" + std::to_string(l) + ".";
    add(pre + "norm1", 1, h, 0, 0, 1, h, false, false);
    // Global columns [head 0: q k v | head 1: q k v | ...]: a contiguous block is whole heads.
    add(pre + "attn.qkv", h, 3 * h, 0, t * 3 * hl, h, 3 * hl, true, true);
    add(pre + "attn.out", h, h, t * hl, 0, hl, h, true, true);
    add(pre + "norm2", 1, h, 0, 0, 1, h, false, false);
    add(pre + "mlp.w1", h, f, 0, t * fl, h, fl, true, true);
    add(pre + "mlp.w2", f, h, t * fl, 0, fl, h, true, true);
  }
  add("w.final_norm", 1, h, 0, 0, 1, h, false, false);
  add("w.head", h, v, 0, 0, h, v, false, true);
  init_weights();
}

Model::~Model() = default;

float Model::init_value(const Param& p, std::int64_t row, std::int64_t col) const {
  if (!p.decay) return 1.0f;  // norm gains
  const double h = static_cast<double>(cfg_.hidden), f = static_cast<double>(cfg_.ffn);
  const double depth = std::sqrt(2.0 * cfg_.layers);  // residual branches (GPT-2)
  double sd = 1.0 / std::sqrt(h);                     // fan-in h: qkv, w1
  if (p.name == "w.embed") sd = 1.0;
  else if (p.name == "w.head") sd = 0.02;  // near-uniform predictions at init
  else if (p.name.ends_with("attn.out")) sd = 1.0 / std::sqrt(h) / depth;
  else if (p.name.ends_with("mlp.w2")) sd = 1.0 / std::sqrt(f) / depth;
  const std::uint64_t key =
      hash_of(cfg_.seed, hash_name(p.name), static_cast<std::uint64_t>(row), static_cast<std::uint64_t>(col));
  // Uniform on [-sqrt(3), sqrt(3)) * sd: variance sd^2.
  return static_cast<float>((2.0 * unit_float(key) - 1.0) * std::sqrt(3.0) * sd);
}

void Model::init_weights() {
  for (Param& p : params_) {
    for (Eigen::Index r = 0; r < p.w.rows(); ++r) {
      for (Eigen::Index c = 0; c < p.w.cols(); ++c) p.w(r, c) = init_value(p, p.row0 + r, p.col0 + c);
    }
  }
}

void Model::zero_grad() {
  for (Param& p : params_) p.g.setZero();
}

AttnShape Model::attn_shape(const Microbatch& mb) const {
  const int hd = cfg_.hidden / cfg_.heads;
  return AttnShape{static_cast<Eigen::Index>(mb.tokens.size()), cfg_.seq, cfg_.heads / comms_.tp(), hd};
}

double Model::forward(const Microbatch& mb, const DropoutKey& drop) {
  const Eigen::Index s_len = cfg_.seq, n = static_cast<Eigen::Index>(mb.tokens.size()) * s_len;
  Cache& c = *cache_;
  c.layers.resize(static_cast<std::size_t>(cfg_.layers));
  Mat x(n, cfg_.hidden);
  for (Eigen::Index i = 0; i < n; ++i)
    x.row(i) = params_[0].w.row(mb.tokens[static_cast<std::size_t>(i / s_len)][static_cast<std::size_t>(i % s_len)]);
  for (int l = 0; l < cfg_.layers; ++l) layer_forward(l, x, mb, drop);
  c.xf = std::move(x);
  rms_forward(c.xf, params_[params_.size() - 2].w, c.nf, c.rf);
  c.dlogits.noalias() = c.nf * params_.back().w;
  return cross_entropy(c.dlogits, mb, s_len);
}

void Model::layer_forward(int l, Mat& x, const Microbatch& mb, const DropoutKey& drop) {
  LayerCache& L = cache_->layers[static_cast<std::size_t>(l)];
  const Param& w1 = params_[layer_param(l, kW1)];
  L.x = x;
  rms_forward(x, params_[layer_param(l, kNorm1)].w, L.n1, L.r1);
  L.qkv.noalias() = L.n1 * params_[layer_param(l, kQkv)].w;
  attention_forward(L, attn_shape(mb));
  Mat y = L.attn * params_[layer_param(l, kOut)].w;
  comms_.all_reduce_tp(y.data(), static_cast<std::size_t>(y.size()));  // row-parallel output
  L.x2 = x + y;
  rms_forward(L.x2, params_[layer_param(l, kNorm2)].w, L.n2, L.r2);
  L.a.noalias() = L.n2 * w1.w;
  L.h = gelu(L.a);
  L.keep.resize(0, 0);
  if (drop.p > 0) {
    dropout_mask(L, mb, drop, l, w1.col0, cfg_.seq);
    L.h.array() *= L.keep.array();
  }
  Mat z = L.h * params_[layer_param(l, kW2)].w;
  comms_.all_reduce_tp(z.data(), static_cast<std::size_t>(z.size()));  // row-parallel output
  x = L.x2 + z;
}

void Model::backward(const Microbatch& mb) {
  const Eigen::Index n = static_cast<Eigen::Index>(mb.tokens.size()) * cfg_.seq;
  Cache& c = *cache_;
  Param& head = params_.back();
  Param& final_norm = params_[params_.size() - 2];
  head.g.noalias() += c.nf.transpose() * c.dlogits;
  const Mat dnf = c.dlogits * head.w.transpose();
  Mat dx = Mat::Zero(n, cfg_.hidden);
  rms_backward(c.xf, c.rf, final_norm.w, dnf, dx, final_norm.g);
  for (int l = cfg_.layers - 1; l >= 0; --l) layer_backward(l, dx, mb);
  Param& embed = params_[0];
  for (Eigen::Index i = 0; i < n; ++i) {
    embed.g.row(mb.tokens[static_cast<std::size_t>(i / cfg_.seq)][static_cast<std::size_t>(i % cfg_.seq)]) += dx.row(i);
  }
}

// dx: in, the gradient of the layer's output; out, that of its input.
void Model::layer_backward(int l, Mat& dx, const Microbatch& mb) {
  const LayerCache& L = cache_->layers[static_cast<std::size_t>(l)];
  Param& qkv = params_[layer_param(l, kQkv)];
  Param& out = params_[layer_param(l, kOut)];
  Param& w1 = params_[layer_param(l, kW1)];
  Param& w2 = params_[layer_param(l, kW2)];
  Param& norm1 = params_[layer_param(l, kNorm1)];
  Param& norm2 = params_[layer_param(l, kNorm2)];
  // MLP: the residual passes dx through; W2's input gradient stays local (row-parallel).
  w2.g.noalias() += L.h.transpose() * dx;
  Mat da = dx * w2.w.transpose();
  if (L.keep.size() > 0) da.array() *= L.keep.array();
  da.array() *= gelu_grad(L.a).array();
  w1.g.noalias() += L.n2.transpose() * da;
  Mat dn2 = da * w1.w.transpose();
  comms_.all_reduce_tp(dn2.data(), static_cast<std::size_t>(dn2.size()));  // column-parallel input
  rms_backward(L.x2, L.r2, norm2.w, dn2, dx, norm2.g);
  // Attention.
  out.g.noalias() += L.attn.transpose() * dx;
  const Mat dqkv = attention_backward(L, dx * out.w.transpose(), attn_shape(mb));
  qkv.g.noalias() += L.n1.transpose() * dqkv;
  Mat dn1 = dqkv * qkv.w.transpose();
  comms_.all_reduce_tp(dn1.data(), static_cast<std::size_t>(dn1.size()));  // column-parallel input
  rms_backward(L.x, L.r1, norm1.w, dn1, dx, norm1.g);
}

double Model::forward_backward(const Microbatch& mb, const DropoutKey& dropout) {
  const double sum = forward(mb, dropout);
  backward(mb);
  return sum;
}

double Model::loss(const Microbatch& mb, const DropoutKey& dropout) { return forward(mb, dropout); }

}  // namespace stepcast::exec::train
