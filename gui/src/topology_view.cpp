// Topology view: devices in rows by kind, one block per node; links coloured by bandwidth
// (log scale, slow red to fast green), thicker with the first ring's load; the ring traced in
// blue over the GPUs; the bottleneck link red and labelled (see views.hpp).
#include <QGraphicsEllipseItem>
#include <QGraphicsLineItem>
#include <QGraphicsSimpleTextItem>
#include <QPainterPath>
#include <cmath>
#include <map>

#include "views.hpp"

namespace dtplan::gui {

namespace {

int row_of(DeviceKind k) {
  switch (k) {
    case DeviceKind::network_switch:
      return 0;
    case DeviceKind::cpu:
      return 1;
    case DeviceKind::pcie_switch:
    case DeviceKind::nvswitch:
      return 2;
    case DeviceKind::gpu:
      return 3;
    case DeviceKind::nic:
      return 4;
  }
  return 2;
}

QColor kind_color(DeviceKind k) {
  switch (k) {
    case DeviceKind::gpu:
      return QColor(118, 185, 0);
    case DeviceKind::cpu:
      return QColor(90, 120, 200);
    case DeviceKind::nic:
      return QColor(200, 160, 60);
    default:
      return QColor(170, 170, 170);
  }
}

// Slow (1 GB/s) red .. fast (500 GB/s) green.
QColor bandwidth_color(double Bps) {
  const double f = std::clamp(std::log10(std::max(Bps, 1e9) / 1e9) / std::log10(500.0), 0.0, 1.0);
  return QColor::fromHsvF(static_cast<float>(0.33 * f), 0.85f, 0.8f);
}

// The least horizontal distance between two devices of a row, in scene units.
constexpr double kDeviceSpacing = 52.0;

// Rows with more devices than this label only the bottleneck link: a label per ring hop would
// cover each other.
constexpr std::size_t kLabelledRow = 16;

std::size_t most_gpus_per_node(const TopologyPicture& p) {
  std::map<std::int64_t, std::size_t> per_node;
  for (const auto& d : p.devices) {
    if (d.gpu_rank >= 0) ++per_node[d.host];
  }
  std::size_t most = 0;
  for (const auto& [host, n] : per_node)
    most = std::max(most, n);
  return most;
}

std::map<std::size_t, QPointF> place_devices(const TopologyPicture& p) {
  // Columns per (node, row); nodes side by side; network switches across the top.
  std::map<std::pair<std::int64_t, int>, std::vector<std::size_t>> cells;
  std::int64_t nodes = 1;
  for (std::size_t i = 0; i < p.devices.size(); ++i) {
    const auto& d = p.devices[i];
    cells[{d.host, row_of(d.kind)}].push_back(i);
    nodes = std::max(nodes, d.host + 1);
  }
  // A crowded row (an NVL72 rack's 72 GPUs) widens its node so devices keep 52 px apart.
  std::size_t widest_row = 1;
  for (const auto& [key, members] : cells) {
    if (key.first >= 0) widest_row = std::max(widest_row, members.size());
  }
  const double node_width =
      std::max(900.0 / static_cast<double>(std::min<std::int64_t>(nodes, 4)) + 120,
               kDeviceSpacing * static_cast<double>(widest_row));
  std::map<std::size_t, QPointF> at;
  for (const auto& [key, members] : cells) {
    const auto [host, row] = key;
    const double x0 = host < 0 ? 0 : static_cast<double>(host) * node_width;
    const double span = host < 0 ? node_width * static_cast<double>(nodes) : node_width;
    for (std::size_t j = 0; j < members.size(); ++j) {
      const double x =
          x0 + span * (static_cast<double>(j) + 0.5) / static_cast<double>(members.size());
      at[members[j]] = QPointF(x, 60 + row * 110.0);
    }
  }
  return at;
}

}  // namespace

TopologyView::TopologyView(QWidget* parent) : QGraphicsView(parent) {
  setScene(new QGraphicsScene(this));
  setRenderHint(QPainter::Antialiasing);
  setBackgroundBrush(Qt::white);
}

void TopologyView::show_analysis(const Analysis& a) {
  auto* s = scene();
  s->clear();
  const auto& p = a.topology;
  const auto at = place_devices(p);
  const bool crowded = most_gpus_per_node(p) > kLabelledRow;
  drawn_links_ = 0;
  for (const auto& l : p.links) {
    const auto pa = at.at(l.from), pb = at.at(l.to);
    const double w =
        l.bottleneck ? 6 : 2 + static_cast<double>(std::min<std::int64_t>(l.ring_hops, 6));
    QPen pen(l.bottleneck ? QColor(220, 0, 0) : bandwidth_color(l.bandwidth_Bps), w);
    if (l.bottleneck) pen.setStyle(Qt::DashLine);
    auto* line = s->addLine(QLineF(pa, pb), pen);
    line->setZValue(-1);
    const auto tip =
        QString("%1 - %2: %3, %4 GB/s achieved per direction; first ring crosses it %5 times")
            .arg(QString::fromStdString(p.devices[l.from].name))
            .arg(QString::fromStdString(p.devices[l.to].name))
            .arg(QString::fromStdString(l.link_class))
            .arg(l.bandwidth_Bps / 1e9, 0, 'f', 1)
            .arg(l.ring_hops);
    line->setToolTip(tip);
    if (l.bottleneck || (l.ring_hops > 0 && !crowded)) {
      auto* label = s->addSimpleText(QString("%1 GB/s%2")
                                         .arg(l.bandwidth_Bps / 1e9, 0, 'f', 0)
                                         .arg(l.ring_hops ? QString(" x%1").arg(l.ring_hops) : ""));
      // Nearer the lower device, so fanned-out links keep their labels apart.
      const auto lo = pa.y() > pb.y() ? pa : pb, hi = pa.y() > pb.y() ? pb : pa;
      label->setPos(hi + (lo - hi) * (pa.y() == pb.y() ? 0.5 : 0.7) + QPointF(6, -14));
      if (l.bottleneck) label->setBrush(QColor(220, 0, 0));
    }
    ++drawn_links_;
  }
  for (const auto& [i, pt] : at) {
    const auto& d = p.devices[i];
    auto* dot = s->addEllipse(pt.x() - 22, pt.y() - 16, 44, 32, QPen(Qt::black),
                              QBrush(kind_color(d.kind)));
    dot->setToolTip(QString::fromStdString(d.name));
    auto* label = s->addSimpleText(QString::fromStdString(d.name));
    label->setPos(pt.x() - label->boundingRect().width() / 2, pt.y() - 8);
  }
  // The first ring over the GPUs: an arc below them for every hop, deeper the farther it
  // goes, so the hop back to the start is visible.
  std::map<std::int64_t, QPointF> gpu_at;
  for (std::size_t d = 0; d < p.devices.size(); ++d) {
    if (p.devices[d].gpu_rank >= 0) gpu_at[p.devices[d].gpu_rank] = at.at(d) + QPointF(0, 18);
  }
  QPainterPath ring;
  for (std::size_t i = 0; i < p.ring.size() && p.ring.size() > 1; ++i) {
    const QPointF from = gpu_at.at(p.ring[i]), to = gpu_at.at(p.ring[(i + 1) % p.ring.size()]);
    const QPointF control((from.x() + to.x()) / 2,
                          std::max(from.y(), to.y()) + 25 + 0.12 * std::abs(to.x() - from.x()));
    ring.moveTo(from);
    ring.quadTo(control, to);
  }
  s->addPath(ring, QPen(QColor(30, 90, 220), 2));
  // Bandwidth colour key.
  const double key_y = s->itemsBoundingRect().bottom() + 30;
  for (int i = 0; i <= 4; ++i) {
    const double Bps = 1e9 * std::pow(500.0, i / 4.0);
    s->addRect(60.0 + i * 150, key_y, 30, 10, QPen(Qt::NoPen), QBrush(bandwidth_color(Bps)));
    s->addSimpleText(QString("%1 GB/s").arg(Bps / 1e9, 0, 'f', 0))
        ->setPos(95.0 + i * 150, key_y - 4);
  }
  s->addSimpleText(
       "link colour: achieved bandwidth per direction; thickness and \"xN\": hops of "
       "the first ring over it")
      ->setPos(60, key_y + 16);
  auto* title = s->addSimpleText(
      QString("%1 x %2 node(s): %3 ring channel(s) over %4 GPUs at %5 GB/s per GPU; bottleneck "
              "%6 -> %7 (%8, %9 GB/s achieved) in red; blue: the first ring's order")
          .arg(QString::fromStdString(a.session.topology))
          .arg(a.session.nodes)
          .arg(p.channels)
          .arg(p.ring.size())
          .arg(p.ring_bandwidth_Bps / 1e9, 0, 'f', 1)
          .arg(QString::fromStdString(p.bottleneck.from))
          .arg(QString::fromStdString(p.bottleneck.to))
          .arg(QString::fromStdString(p.bottleneck.link_class))
          .arg(p.bottleneck.achieved_Bps / 1e9, 0, 'f', 1));
  title->setPos(0, -10);
  const auto box = s->itemsBoundingRect().adjusted(-20, -20, 20, 20);
  s->setSceneRect(box);
  fitInView(box, Qt::KeepAspectRatio);
}

}  // namespace dtplan::gui
